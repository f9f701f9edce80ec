//! The lists a database holds: one [`Threat`] per Firefox Safe Browsing table of the `google4`
//! provider, and [`Lists`], the set of lists one full hash is on.
//!
//! Firefox ESR 153's default preferences (its `omni.ja`, `greprefs.js`) give the `google4`
//! provider seven tables (`browser.safebrowsing.provider.google4.lists`) and use five of them
//! (`urlclassifier.malwareTable`, `phishTable`, `downloadBlockTable`, `downloadAllowTable`);
//! `googpub-phish-proto` and `goog-harmful-proto` are named by the provider but by no table
//! preference, so Firefox never fetches them. The five used are the five threats here.

/// One Safe Browsing list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Threat {
    /// `goog-malware-proto` (`MALWARE_THREAT`): Firefox's malware page.
    Malware,
    /// `goog-phish-proto` (`SOCIAL_ENGINEERING`): Firefox's deceptive-site page.
    Phishing,
    /// `goog-unwanted-proto` (`UNWANTED_SOFTWARE`): Firefox's unwanted-software page.
    Unwanted,
    /// `goog-badbinurl-proto` (`MALICIOUS_BINARY`): downloads from these URLs are blocked.
    Download,
    /// `goog-downloadwhite-proto` (`CSD_DOWNLOAD_WHITELIST`): downloads from these URLs are
    /// trusted (an allow list).
    DownloadAllow,
}

impl Threat {
    /// Every list, in bit order.
    pub const ALL: [Threat; 5] = [
        Threat::Malware,
        Threat::Phishing,
        Threat::Unwanted,
        Threat::Download,
        Threat::DownloadAllow,
    ];

    /// Its bit in a [`Lists`] set (and in the database and index formats).
    pub fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// The name `pir safebrowsing build --threat NAME=FILE` takes.
    pub fn name(self) -> &'static str {
        match self {
            Threat::Malware => "malware",
            Threat::Phishing => "phishing",
            Threat::Unwanted => "unwanted",
            Threat::Download => "download",
            Threat::DownloadAllow => "download-allow",
        }
    }

    /// The list named `name` (as [`Threat::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Firefox's table name.
    pub fn table(self) -> &'static str {
        match self {
            Threat::Malware => "goog-malware-proto",
            Threat::Phishing => "goog-phish-proto",
            Threat::Unwanted => "goog-unwanted-proto",
            Threat::Download => "goog-badbinurl-proto",
            Threat::DownloadAllow => "goog-downloadwhite-proto",
        }
    }

    /// The v4 API's `ThreatType` of the table (what Firefox sends and expects back).
    pub fn threat_type(self) -> i32 {
        use crate::proto;
        match self {
            Threat::Malware => proto::MALWARE_THREAT,
            Threat::Phishing => proto::SOCIAL_ENGINEERING,
            Threat::Unwanted => proto::UNWANTED_SOFTWARE,
            Threat::Download => proto::MALICIOUS_BINARY,
            Threat::DownloadAllow => proto::CSD_DOWNLOAD_WHITELIST,
        }
    }

    /// The list of a v4 `ThreatType`, if it is one served here.
    pub fn of_threat_type(threat_type: i32) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.threat_type() == threat_type)
    }
}

impl std::fmt::Display for Threat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of lists (one bit per [`Threat`]); empty for a removed (dead) record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Lists(u8);

impl Lists {
    /// No list.
    pub const NONE: Lists = Lists(0);

    /// The bits of every known list.
    const KNOWN: u8 = (1 << Threat::ALL.len()) - 1;

    /// Every list.
    pub const ALL: Lists = Lists(Self::KNOWN);

    /// The set of `bits`, if every bit names a list.
    pub fn from_bits(bits: u8) -> Option<Self> {
        (bits & !Self::KNOWN == 0).then_some(Self(bits))
    }

    /// The bits (as written in the formats).
    pub fn bits(self) -> u8 {
        self.0
    }

    /// The set holding `threat` only.
    pub fn of(threat: Threat) -> Self {
        Self(threat.bit())
    }

    /// Whether `threat` is in the set.
    pub fn contains(self, threat: Threat) -> bool {
        self.0 & threat.bit() != 0
    }

    /// Adds `threat`.
    pub fn insert(&mut self, threat: Threat) {
        self.0 |= threat.bit();
    }

    /// Removes `threat`.
    pub fn remove(&mut self, threat: Threat) {
        self.0 &= !threat.bit();
    }

    /// Whether every list of `self` is in `other`.
    pub fn is_subset(self, other: Lists) -> bool {
        self.0 & !other.0 == 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Its lists, in bit order.
    pub fn iter(self) -> impl Iterator<Item = Threat> {
        Threat::ALL.into_iter().filter(move |t| self.contains(*t))
    }
}

impl std::fmt::Display for Lists {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.iter().map(Threat::name).collect();
        f.write_str(&names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_tables_and_threat_types_round_trip() {
        assert_eq!(Threat::ALL.len(), 5);
        for threat in Threat::ALL {
            assert_eq!(Threat::from_name(threat.name()), Some(threat));
            assert_eq!(Threat::of_threat_type(threat.threat_type()), Some(threat));
            assert!(threat.table().starts_with("goog-") && threat.table().ends_with("-proto"));
        }
        assert_eq!(Threat::from_name("harmful"), None);
        assert_eq!(
            Threat::of_threat_type(crate::proto::SOCIAL_ENGINEERING_PUBLIC),
            None
        );
    }

    #[test]
    fn sets_hold_known_lists_only() {
        let mut lists = Lists::of(Threat::Phishing);
        lists.insert(Threat::Malware);
        assert_eq!(
            lists.iter().collect::<Vec<_>>(),
            [Threat::Malware, Threat::Phishing]
        );
        assert_eq!(lists.to_string(), "malware, phishing");
        assert!(Lists::of(Threat::Malware).is_subset(lists));
        lists.remove(Threat::Malware);
        assert!(!lists.contains(Threat::Malware));
        assert_eq!(Lists::from_bits(0b1_1111).map(Lists::bits), Some(0b1_1111));
        assert_eq!(Lists::from_bits(0b10_0000), None);
    }
}
