//! The vendor's registry of mirrors: registrations, approval, probe outcomes and proofs, and
//! from them the next mirror list and why each mirror is on it or not.
//!
//! Sans-I/O: the service ([`crate::command`]) feeds it what it learned (a registration, the
//! operator's approvals read from disk, a probe's outcome, a proof from evidence) and signs
//! and publishes what [`Registry::publish`] returns. Every change comes back as a
//! [`Decision`] with its reason, for the log and the metrics.
//!
//! Rules (upPIR's vendor, Cappos 2013, section 4.1, made explicit):
//! - a mirror is listed when it registered (signed by its key), is approved by the operator
//!   (`pir vendor approve`, or `--allow` in advance), is not a proven liar, and passed its
//!   latest probe;
//! - a probe failure (down, not serving the current release, a wrong answer) drops it from the
//!   next list; passing again brings it back;
//! - evidence that it signed a wrong answer drops it at once and for good: only the operator's
//!   approval, given again, lifts that.

use std::collections::{BTreeMap, HashMap, HashSet};

use pir_keys::{PublicKey, SecretKey};

use pir_xor::held::ChunkSet;

use super::wire::SignedRegistration;
use crate::mirrors::{ListedRelease, MirrorEntry, MAX_MIRRORS};
use crate::MirrorList;

/// Oldest (or furthest in the future) registration accepted, in seconds from now: a captured
/// registration cannot be replayed later to move a mirror back to an old URL.
pub const MAX_REGISTRATION_SKEW: u64 = 600;

/// What a probe of one mirror found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// Up, serving the current release, and its answer to a private query was right.
    Passed,
    /// Unreachable, or it refused or failed the probe's requests.
    Dead(String),
    /// It does not serve the current release.
    WrongRelease(String),
    /// Its answer to the private query decoded to a block that fails the manifest's hash.
    WrongAnswer(String),
}

/// What the vendor did about a mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// A registration kept, waiting for approval.
    Pending,
    /// A mirror approved (listed once it passes a probe).
    Admitted,
    /// A registration refused.
    Refused,
    /// A mirror put on the list.
    Listed,
    /// A mirror taken off the list.
    Dropped,
}

impl Action {
    /// The metrics label.
    pub fn label(self) -> &'static str {
        match self {
            Action::Pending => "pending",
            Action::Admitted => "admitted",
            Action::Refused => "refused",
            Action::Listed => "listed",
            Action::Dropped => "dropped",
        }
    }
}

/// Why, as a metrics label (the decision's `detail` says it in words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// The operator has not approved the key yet.
    AwaitingApproval,
    /// The operator approved the key (or `--allow` did).
    Approved,
    /// The operator's approval was withdrawn.
    Unapproved,
    /// The registration's signature does not verify under the key it names.
    BadSignature,
    /// The registration names another vendor key.
    OtherVendor,
    /// The registration was signed too long ago (or in the future).
    StaleRegistration,
    /// Another mirror key already registered that URL.
    UrlTaken,
    /// Evidence proved it signed a wrong answer.
    ProvenLiar,
    /// It passed its probe.
    ProbePassed,
    /// The probe could not reach it or it failed the requests.
    Unreachable,
    /// It does not serve the current release.
    WrongRelease,
    /// The probe's private query came back wrong.
    WrongAnswer,
    /// The list is full ([`MAX_MIRRORS`]).
    ListFull,
}

impl Reason {
    /// The metrics label.
    pub fn label(self) -> &'static str {
        match self {
            Reason::AwaitingApproval => "awaiting_approval",
            Reason::Approved => "approved",
            Reason::Unapproved => "unapproved",
            Reason::BadSignature => "bad_signature",
            Reason::OtherVendor => "other_vendor",
            Reason::StaleRegistration => "stale_registration",
            Reason::UrlTaken => "url_taken",
            Reason::ProvenLiar => "proven_liar",
            Reason::ProbePassed => "probe_passed",
            Reason::Unreachable => "unreachable",
            Reason::WrongRelease => "wrong_release",
            Reason::WrongAnswer => "wrong_answer",
            Reason::ListFull => "list_full",
        }
    }
}

/// One decision about one mirror, with its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// What was done.
    pub action: Action,
    /// Why (the metrics label).
    pub reason: Reason,
    /// The mirror's URL (empty for a key approved before it registered).
    pub url: String,
    /// The mirror's key.
    pub key: PublicKey,
    /// Why, in words.
    pub detail: String,
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "mirror {} (key {}) {}: {}",
            if self.url.is_empty() { "-" } else { &self.url },
            self.key.fingerprint(),
            self.action.label(),
            self.detail
        )
    }
}

/// One registered mirror.
#[derive(Debug, Clone)]
struct Mirror {
    url: String,
    last_probe: Option<ProbeOutcome>,
    /// What its last passed probe found it serving (the release) and holding (the chunks):
    /// the list states both for it.
    learned: (Option<ListedRelease>, Option<ChunkSet>),
}

impl Mirror {
    fn at(url: String) -> Mirror {
        Mirror {
            url,
            last_probe: None,
            learned: (None, None),
        }
    }

    /// Its entry in the next list.
    fn entry(&self, key: PublicKey) -> MirrorEntry {
        MirrorEntry {
            release: self.learned.0,
            chunks: self.learned.1.clone(),
            ..MirrorEntry::new(self.url.clone(), key)
        }
    }
}

/// The vendor's view of its mirrors.
#[derive(Debug)]
pub struct Registry {
    vendor: PublicKey,
    /// Registered mirrors, by key.
    mirrors: BTreeMap<[u8; 32], Mirror>,
    /// Approved keys (the operator's approvals and `--allow`).
    approved: HashSet<PublicKey>,
    /// Proven liars, with the proof's words.
    proven: HashMap<PublicKey, String>,
    /// The mirrors of the list published last, by key.
    listed: Vec<MirrorEntry>,
    /// The version of the list published last (0: none yet).
    list_version: u64,
    /// When the list published last expires.
    expires_unix: u64,
    /// When it was signed.
    created_unix: u64,
}

impl Registry {
    /// An empty registry for `vendor`'s key.
    pub fn new(vendor: PublicKey) -> Self {
        Self {
            vendor,
            mirrors: BTreeMap::new(),
            approved: HashSet::new(),
            proven: HashMap::new(),
            listed: Vec::new(),
            list_version: 0,
            expires_unix: 0,
            created_unix: 0,
        }
    }

    /// The version of the list published last (0: none yet).
    pub fn list_version(&self) -> u64 {
        self.list_version
    }

    /// The mirrors of the list published last.
    pub fn listed(&self) -> &[MirrorEntry] {
        &self.listed
    }

    /// Registered mirrors: (URL, key, approved, proven).
    pub fn registered(&self) -> Vec<(String, PublicKey, bool, bool)> {
        self.mirrors
            .iter()
            .map(|(key, m)| {
                let key = PublicKey(*key);
                (
                    m.url.clone(),
                    key,
                    self.approved.contains(&key),
                    self.proven.contains_key(&key),
                )
            })
            .collect()
    }

    /// A list published before (read back at start), so that versions keep rising and the
    /// mirrors already listed stay listed until a probe says otherwise.
    pub fn resume(&mut self, list: &MirrorList) {
        self.list_version = list.list_version;
        self.expires_unix = list.expires_unix;
        self.created_unix = list.created_unix;
        self.listed = list.mirrors.clone();
    }

    /// A registration verified before (kept by the service across a restart): the mirror
    /// at `url` is probed again before it is listed.
    pub fn restore(&mut self, key: PublicKey, url: String) {
        if crate::mirrors::check_mirror_url(&url).is_ok() {
            self.mirrors.insert(key.0, Mirror::at(url));
        }
    }

    /// Takes a mirror's registration received at `now`.
    pub fn register(&mut self, signed: &SignedRegistration, now: u64) -> Decision {
        let r = &signed.registration;
        let decide = |action, reason, detail: String| Decision {
            action,
            reason,
            url: r.url.clone(),
            key: r.mirror,
            detail,
        };
        if !signed.verify() {
            return decide(
                Action::Refused,
                Reason::BadSignature,
                "the registration is not signed by the key it names".into(),
            );
        }
        if r.vendor != self.vendor {
            return decide(
                Action::Refused,
                Reason::OtherVendor,
                format!(
                    "the registration is for vendor key {}, this is {}",
                    r.vendor.fingerprint(),
                    self.vendor.fingerprint()
                ),
            );
        }
        if r.created_unix.abs_diff(now) > MAX_REGISTRATION_SKEW {
            return decide(
                Action::Refused,
                Reason::StaleRegistration,
                format!(
                    "the registration was signed at {} and it is {now}: check the mirror's clock \
                     and register again",
                    r.created_unix
                ),
            );
        }
        if let Some(why) = self.proven.get(&r.mirror) {
            return decide(
                Action::Refused,
                Reason::ProvenLiar,
                format!("proven to have signed a wrong answer ({why}); only the operator can admit it again"),
            );
        }
        if let Some((other, _)) = self
            .mirrors
            .iter()
            .find(|(key, m)| m.url == r.url && **key != r.mirror.0)
        {
            return decide(
                Action::Refused,
                Reason::UrlTaken,
                format!(
                    "{} is registered by mirror key {}",
                    r.url,
                    PublicKey(*other).fingerprint()
                ),
            );
        }
        let entry = self
            .mirrors
            .entry(r.mirror.0)
            .or_insert_with(|| Mirror::at(r.url.clone()));
        if entry.url != r.url {
            // A new address must pass a probe before clients are sent there.
            *entry = Mirror::at(r.url.clone());
        }
        if self.approved.contains(&r.mirror) {
            decide(
                Action::Admitted,
                Reason::Approved,
                "approved; listed once it passes a probe".into(),
            )
        } else {
            decide(
                Action::Pending,
                Reason::AwaitingApproval,
                format!(
                    "waiting for the operator's approval: pir vendor approve MIRROR.pub (key {})",
                    r.mirror.fingerprint()
                ),
            )
        }
    }

    /// Replaces the approvals and proofs with the operator's (`approved`, `--allow`
    /// included; `proven`: the liars not approved again since). Returns what changed.
    pub fn sync(
        &mut self,
        approved: HashSet<PublicKey>,
        proven: HashMap<PublicKey, String>,
    ) -> Vec<Decision> {
        let mut decisions = Vec::new();
        for key in approved.difference(&self.approved) {
            decisions.push(Decision {
                action: Action::Admitted,
                reason: Reason::Approved,
                url: self.url_of(key),
                key: *key,
                detail: "approved by the operator; listed once it passes a probe".into(),
            });
        }
        self.approved = approved;
        self.proven = proven;
        decisions
    }

    /// Marks `key` a proven liar (`why`: the verdict): it leaves the next list and stays off.
    pub fn prove(&mut self, key: PublicKey, why: String) {
        self.proven.insert(key, why);
    }

    fn url_of(&self, key: &PublicKey) -> String {
        self.mirrors
            .get(&key.0)
            .map(|m| m.url.clone())
            .unwrap_or_default()
    }

    /// The mirrors to probe now: registered, approved and not proven.
    pub fn to_probe(&self) -> Vec<MirrorEntry> {
        self.mirrors
            .iter()
            .map(|(key, m)| (PublicKey(*key), m))
            .filter(|(key, _)| self.approved.contains(key) && !self.proven.contains_key(key))
            .map(|(key, m)| MirrorEntry::new(m.url.clone(), key))
            .collect()
    }

    /// Notes what the probe of `mirror` found (ignored if it moved or left meanwhile). When
    /// it passed, the release and chunks `mirror` states (what the probe found) are what the
    /// next list says of it.
    pub fn probed(&mut self, mirror: &MirrorEntry, outcome: ProbeOutcome) {
        if let Some(m) = self.mirrors.get_mut(&mirror.key.0) {
            if m.url == mirror.url {
                if outcome == ProbeOutcome::Passed {
                    m.learned = (mirror.release, mirror.chunks.clone());
                }
                m.last_probe = Some(outcome);
            }
        }
    }

    /// Why `key` may not be listed, if so.
    fn excluded(&self, key: &PublicKey) -> Option<(Reason, String)> {
        if let Some(why) = self.proven.get(key) {
            return Some((Reason::ProvenLiar, format!("proven liar: {why}")));
        }
        if !self.approved.contains(key) {
            return Some((Reason::Unapproved, "not approved by the operator".into()));
        }
        match self.mirrors.get(&key.0).and_then(|m| m.last_probe.as_ref()) {
            None => Some((Reason::Unreachable, "not probed yet at its address".into())),
            Some(ProbeOutcome::Passed) => None,
            Some(ProbeOutcome::Dead(why)) => Some((Reason::Unreachable, why.clone())),
            Some(ProbeOutcome::WrongRelease(why)) => Some((Reason::WrongRelease, why.clone())),
            Some(ProbeOutcome::WrongAnswer(why)) => Some((Reason::WrongAnswer, why.clone())),
        }
    }

    /// The mirrors the next list should hold, and the decisions that take the list there
    /// from the one published last.
    pub fn next_mirrors(&self) -> (Vec<MirrorEntry>, Vec<Decision>) {
        let mut decisions = Vec::new();
        let mut next = Vec::new();
        for (key, m) in &self.mirrors {
            let key = PublicKey(*key);
            let was = self.listed.iter().any(|e| e.key == key && e.url == m.url);
            let entry = m.entry(key);
            match self.excluded(&key) {
                None if next.len() >= MAX_MIRRORS => decisions.push(Decision {
                    action: Action::Dropped,
                    reason: Reason::ListFull,
                    url: m.url.clone(),
                    key,
                    detail: format!("a list holds at most {MAX_MIRRORS} mirrors"),
                }),
                None => {
                    next.push(entry);
                    if !was {
                        decisions.push(Decision {
                            action: Action::Listed,
                            reason: Reason::ProbePassed,
                            url: m.url.clone(),
                            key,
                            detail: "passed its probe (up, serving the release, answered a \
                                     private query correctly)"
                                .into(),
                        });
                    }
                }
                Some((reason, detail)) if was => decisions.push(Decision {
                    action: Action::Dropped,
                    reason,
                    url: m.url.clone(),
                    key,
                    detail,
                }),
                Some(_) => {}
            }
        }
        // Listed before under a key or URL no longer registered (a moved mirror).
        for old in &self.listed {
            let registered = self
                .mirrors
                .get(&old.key.0)
                .is_some_and(|m| m.url == old.url);
            if !registered {
                decisions.push(Decision {
                    action: Action::Dropped,
                    reason: Reason::Unreachable,
                    url: old.url.clone(),
                    key: old.key,
                    detail: "no longer registered at this address".into(),
                });
            }
        }
        (next, decisions)
    }

    /// Signs the next list with `vendor` when it differs from the one published last or that
    /// one is past half its life (`valid_seconds` from `now`). Returns the signed bytes and
    /// the decisions; `None` when nothing needs publishing, or when no mirror may be listed
    /// (a list holds at least one: the last one stays, the decisions say why).
    pub fn publish(
        &mut self,
        vendor: &SecretKey,
        now: u64,
        valid_seconds: u64,
    ) -> (Option<Vec<u8>>, Vec<Decision>) {
        let (next, decisions) = self.next_mirrors();
        let changed = next != self.listed;
        let half_life =
            self.created_unix + (self.expires_unix - self.created_unix.min(self.expires_unix)) / 2;
        let ageing = self.list_version == 0 || now >= half_life;
        if next.is_empty() || !(changed || ageing) {
            return (None, decisions);
        }
        let list = MirrorList {
            created_unix: now,
            list_version: next_version(self.list_version, now),
            expires_unix: now + valid_seconds,
            mirrors: next,
        };
        let bytes = list.encode_signed(vendor);
        self.resume(&list);
        (Some(bytes), decisions)
    }
}

/// The version of the next list: the time in seconds, or one more than the last if that is
/// not higher (several lists in one second, or a clock set back): versions only rise, across
/// restarts too, without state.
pub fn next_version(previous: u64, now: u64) -> u64 {
    now.max(previous.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::super::wire::Registration;
    use super::*;

    const NOW: u64 = 1_800_000_000;

    struct World {
        vendor: SecretKey,
        registry: Registry,
        mirrors: Vec<SecretKey>,
    }

    fn world(count: usize) -> World {
        let vendor = SecretKey::generate().unwrap();
        World {
            registry: Registry::new(vendor.public()),
            vendor,
            mirrors: (0..count).map(|_| SecretKey::generate().unwrap()).collect(),
        }
    }

    impl World {
        fn url(&self, i: usize) -> String {
            format!("https://127.0.0.1:{}", 8000 + i)
        }

        fn registration(&self, i: usize) -> SignedRegistration {
            Registration {
                url: self.url(i),
                mirror: self.mirrors[i].public(),
                vendor: self.vendor.public(),
                created_unix: NOW,
            }
            .sign(&self.mirrors[i])
        }

        fn entry(&self, i: usize) -> MirrorEntry {
            MirrorEntry::new(self.url(i), self.mirrors[i].public())
        }

        fn approve(&mut self, which: &[usize]) -> Vec<Decision> {
            let keys = which.iter().map(|&i| self.mirrors[i].public()).collect();
            let proven = self.registry.proven.clone();
            self.registry.sync(keys, proven)
        }

        fn publish(&mut self, now: u64) -> (Option<MirrorList>, Vec<Decision>) {
            let (bytes, decisions) = self.registry.publish(&self.vendor, now, 3600);
            let list =
                bytes.map(|b| MirrorList::decode_verified(&b, &self.vendor.public()).unwrap());
            (list, decisions)
        }
    }

    fn actions(decisions: &[Decision]) -> Vec<(Action, Reason)> {
        decisions.iter().map(|d| (d.action, d.reason)).collect()
    }

    #[test]
    fn a_registration_waits_for_approval_and_a_probe_before_it_is_listed() {
        let mut w = world(2);
        let signed = w.registration(0);
        let d = w.registry.register(&signed, NOW);
        assert_eq!(
            (d.action, d.reason),
            (Action::Pending, Reason::AwaitingApproval)
        );
        assert!(d.detail.contains("pir vendor approve"), "{d}");
        assert!(
            w.registry.to_probe().is_empty(),
            "not probed before approval"
        );
        w.registry.probed(&w.entry(0), ProbeOutcome::Passed);
        assert_eq!(w.publish(NOW).0, None, "nothing approved: no list");

        let d = w.approve(&[0]);
        assert_eq!(actions(&d), [(Action::Admitted, Reason::Approved)]);
        assert_eq!(w.registry.to_probe(), [w.entry(0)]);
        let (list, d) = w.publish(NOW);
        let list = list.expect("approved and passed: listed");
        assert_eq!(list.mirrors, [w.entry(0)]);
        assert_eq!(list.list_version, NOW);
        assert_eq!(actions(&d), [(Action::Listed, Reason::ProbePassed)]);
        // Registering again once approved is admitted at once.
        let d = w.registry.register(&signed, NOW + 1);
        assert_eq!(d.action, Action::Admitted);
        // Nothing changed and the list is young: nothing to publish.
        assert_eq!(w.publish(NOW + 10).0, None);
        // Past half its life, the same mirrors are signed again under a newer version.
        let list = w.publish(NOW + 1800).0.unwrap();
        assert_eq!(list.list_version, NOW + 1800);
    }

    #[test]
    fn forged_foreign_stale_and_squatting_registrations_are_refused() {
        let mut w = world(2);
        let mut forged = w.registration(0);
        forged.registration.url = w.url(5);
        let refused = |w: &mut World, signed: &SignedRegistration, now| {
            let d = w.registry.register(signed, now);
            assert_eq!(d.action, Action::Refused, "{d}");
            d.reason
        };
        assert_eq!(refused(&mut w, &forged, NOW), Reason::BadSignature);
        let foreign = Registration {
            url: w.url(0),
            mirror: w.mirrors[0].public(),
            vendor: w.mirrors[1].public(),
            created_unix: NOW,
        }
        .sign(&w.mirrors[0]);
        assert_eq!(refused(&mut w, &foreign, NOW), Reason::OtherVendor);
        let signed = w.registration(0);
        assert_eq!(
            refused(&mut w, &signed, NOW + MAX_REGISTRATION_SKEW + 1),
            Reason::StaleRegistration
        );
        w.registry.register(&signed, NOW);
        let squat = Registration {
            url: w.url(0),
            mirror: w.mirrors[1].public(),
            vendor: w.vendor.public(),
            created_unix: NOW,
        }
        .sign(&w.mirrors[1]);
        assert_eq!(refused(&mut w, &squat, NOW), Reason::UrlTaken);
    }

    #[test]
    fn failed_probes_drop_a_mirror_until_it_passes_and_a_proven_liar_stays_off() {
        let mut w = world(4);
        for i in 0..4 {
            let signed = w.registration(i);
            w.registry.register(&signed, NOW);
        }
        w.approve(&[0, 1, 2, 3]);
        for i in 0..4 {
            w.registry.probed(&w.entry(i), ProbeOutcome::Passed);
        }
        let (list, _) = w.publish(NOW);
        assert_eq!(list.unwrap().mirrors.len(), 4);

        w.registry
            .probed(&w.entry(1), ProbeOutcome::Dead("connection refused".into()));
        w.registry.probed(
            &w.entry(2),
            ProbeOutcome::WrongAnswer("block 3 wrong".into()),
        );
        let (list, d) = w.publish(NOW + 1);
        let list = list.unwrap();
        // The list is in key order, and the keys are random: compare as sets.
        let mut listed: Vec<String> = list.mirrors.iter().map(|m| m.url.clone()).collect();
        listed.sort();
        assert_eq!(listed, [w.url(0), w.url(3)]);
        assert_eq!(list.mirrors.len(), 2);
        assert!(!list.mirrors.contains(&w.entry(1)) && !list.mirrors.contains(&w.entry(2)));
        assert_eq!(list.list_version, NOW + 1);
        let mut why = actions(&d);
        why.sort();
        assert_eq!(
            why,
            [
                (Action::Dropped, Reason::Unreachable),
                (Action::Dropped, Reason::WrongAnswer)
            ]
        );
        assert!(d.iter().any(|d| d.detail == "connection refused"));

        // Passing again brings a mirror back.
        w.registry.probed(&w.entry(1), ProbeOutcome::Passed);
        let (list, d) = w.publish(NOW + 2);
        assert_eq!(list.unwrap().mirrors.len(), 3);
        assert_eq!(actions(&d), [(Action::Listed, Reason::ProbePassed)]);

        // A proven liar leaves at once and stays off whatever its probes say, and cannot
        // register again, until the operator approves it again.
        w.registry
            .prove(w.mirrors[3].public(), "CHEATED on query 0".into());
        w.registry.probed(&w.entry(3), ProbeOutcome::Passed);
        let (list, d) = w.publish(NOW + 3);
        assert!(!list.unwrap().mirrors.contains(&w.entry(3)));
        assert_eq!(actions(&d), [(Action::Dropped, Reason::ProvenLiar)]);
        assert!(!w.registry.to_probe().contains(&w.entry(3)));
        let signed = w.registration(3);
        assert_eq!(w.registry.register(&signed, NOW).reason, Reason::ProvenLiar);
        let approved = (0..4).map(|i| w.mirrors[i].public()).collect();
        w.registry.sync(approved, HashMap::new());
        w.registry.probed(&w.entry(3), ProbeOutcome::Passed);
        assert!(w.publish(NOW + 4).0.unwrap().mirrors.contains(&w.entry(3)));
    }

    #[test]
    fn versions_only_rise_and_an_empty_list_is_never_signed() {
        assert_eq!(next_version(5, 100), 100);
        assert_eq!(next_version(100, 100), 101);
        assert_eq!(next_version(200, 100), 201, "a clock set back");
        let mut w = world(1);
        let signed = w.registration(0);
        w.registry.register(&signed, NOW);
        w.approve(&[0]);
        w.registry.probed(&w.entry(0), ProbeOutcome::Passed);
        assert!(w.publish(NOW).0.is_some());
        w.registry
            .probed(&w.entry(0), ProbeOutcome::Dead("down".into()));
        let (list, d) = w.publish(NOW + 1);
        assert_eq!(list, None, "no mirror left: the last list stays");
        assert_eq!(actions(&d), [(Action::Dropped, Reason::Unreachable)]);
    }
}

#[cfg(test)]
mod learned_tests {
    use super::super::wire::Registration;
    use super::*;

    /// The release and chunks a passed probe found are what the list says of the mirror; a
    /// later failed probe does not change them, another pass with other chunks does.
    #[test]
    fn the_list_states_what_the_last_passed_probe_found() {
        let vendor = SecretKey::generate().unwrap();
        let mirror = SecretKey::generate().unwrap();
        let mut registry = Registry::new(vendor.public());
        let now = 1_800_000_000;
        let url = "https://127.0.0.1:8000".to_string();
        let signed = Registration {
            url: url.clone(),
            mirror: mirror.public(),
            vendor: vendor.public(),
            created_unix: now,
        }
        .sign(&mirror);
        registry.register(&signed, now);
        registry.sync([mirror.public()].into(), HashMap::new());
        let found = MirrorEntry {
            release: Some(ListedRelease {
                id: [3; 32],
                version: 7,
            }),
            chunks: Some(ChunkSet::new(4, vec![0, 1]).unwrap()),
            ..MirrorEntry::new(url.clone(), mirror.public())
        };
        registry.probed(&found, ProbeOutcome::Passed);
        let (bytes, _) = registry.publish(&vendor, now, 3600);
        let list = MirrorList::decode_verified(&bytes.unwrap(), &vendor.public()).unwrap();
        assert_eq!(list.mirrors, std::slice::from_ref(&found));

        let moved = MirrorEntry {
            chunks: Some(ChunkSet::new(4, vec![2, 3]).unwrap()),
            ..found.clone()
        };
        registry.probed(&moved, ProbeOutcome::Dead("down".into()));
        registry.probed(&found, ProbeOutcome::Passed);
        assert_eq!(registry.next_mirrors().0, [found]);
        registry.probed(&moved, ProbeOutcome::Passed);
        assert_eq!(registry.next_mirrors().0, [moved]);
    }
}
