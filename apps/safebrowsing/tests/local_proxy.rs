//! The local proxy without the binary: two Checklist servers in this process (over
//! `LocalTransport`), the proxy opened on them, and the browser's requests handed to
//! [`LocalProxy::handle`] as Firefox sends them and as a web page could; what a page can send
//! is refused, and one update answers each list at most once.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::Arc;

use base64ct::Encoding;
use bytes::Bytes;
use http::{Request, StatusCode};
use pir_client::LocalTransport;
use pir_keys::SecretKey;
use pir_safebrowsing::command::bucket_release;
use pir_safebrowsing::list::ListDatabase;
use pir_safebrowsing::local::{Connect, LocalProxy, FIND_PATH, UPDATE_PATH};
use pir_safebrowsing::proto;
use pir_safebrowsing::testing::{find_request, update_request};
use pir_service::checklist::{download_envelope, Role};
use pir_service::{Handler, Metrics, ReleaseSet};
use prost::Message;

/// The two servers of `list` (offline first), as the binary's `serve` builds them.
fn servers(list: &ListDatabase) -> (Vec<Arc<dyn Handler>>, [pir_keys::PublicKey; 2]) {
    let mut handlers: Vec<Arc<dyn Handler>> = Vec::new();
    let mut keys = Vec::new();
    for position in 0..2 {
        let role = Role::of(position).unwrap();
        let key = SecretKey::generate().unwrap();
        keys.push(key.public());
        let metrics = Arc::new(Metrics::default());
        let releases = (list.buckets().iter())
            .map(|bucket| {
                let key = SecretKey::from_pkcs8(key.pkcs8()).unwrap();
                bucket_release(list, bucket, role, key, metrics.clone()).unwrap()
            })
            .collect();
        let set = ReleaseSet::new(releases, metrics).unwrap();
        if role == Role::Offline {
            set.set_download(Some(download_envelope(&list.index().encode())));
        }
        handlers.push(Arc::new(set));
    }
    (handlers, [keys[0], keys[1]])
}

async fn open(list: &ListDatabase, state: &std::path::Path) -> LocalProxy<LocalTransport> {
    let (handlers, keys) = servers(list);
    let connect: Connect<LocalTransport> =
        Arc::new(move || Ok(LocalTransport::new(handlers.clone())));
    LocalProxy::open_with(
        connect,
        keys,
        state.to_path_buf(),
        pir_client::LookupScheme::Checklist,
        Arc::new(|_, _| {}),
    )
    .await
    .unwrap()
}

/// A full update of `lists` ((threat type, platform type) pairs).
fn update_message(lists: &[(i32, i32)]) -> Vec<u8> {
    update_request(lists, &[])
}

/// A lookup of one prefix.
fn find_message(prefix: &[u8]) -> Vec<u8> {
    find_request(&[prefix])
}

/// A call as Firefox ESR 153 makes it: GET, `$req` in the URL, the method override header.
fn as_firefox(path: &str, message: &[u8]) -> Request<Bytes> {
    let req = base64ct::Base64Url::encode_string(message);
    Request::get(format!(
        "{path}?$ct=application/x-protobuf&key=pir&$httpMethod=POST&$req={req}"
    ))
    .header("x-http-method-override", "POST")
    .header("sec-fetch-site", "none")
    .header("sec-fetch-mode", "no-cors")
    .body(Bytes::new())
    .unwrap()
}

fn post(path: &str, content_type: &str, message: &[u8]) -> Request<Bytes> {
    Request::post(path)
        .header("content-type", content_type)
        .body(Bytes::from(message.to_vec()))
        .unwrap()
}

fn list() -> ListDatabase {
    let text: String = (0..300)
        .map(|k| format!("host{k}.evil.example\n"))
        .collect();
    ListDatabase::build_with("t", &text, Some(20)).unwrap().0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firefox_calls_are_answered() {
    let list = list();
    let state = tempfile::tempdir().unwrap();
    let proxy = open(&list, state.path()).await;
    assert!(proxy.describe().await.contains("1 by Checklist"));

    let reply = proxy
        .handle(as_firefox(
            UPDATE_PATH,
            &update_message(&[(proto::MALWARE_THREAT, 2)]),
        ))
        .await;
    assert_eq!(reply.status(), StatusCode::OK);
    let update = proto::FetchThreatListUpdatesResponse::decode(reply.body().as_ref()).unwrap();
    let raw = &update.list_update_responses[0].additions[0]
        .raw_hashes
        .as_ref()
        .unwrap()
        .raw_hashes;
    assert_eq!(raw.len(), 4 * list.index().distinct().len());

    let listed = pir_safebrowsing::entry_hash("host7.evil.example").unwrap();
    for request in [
        as_firefox(FIND_PATH, &find_message(&listed[..4])),
        post(
            FIND_PATH,
            "application/x-protobuf",
            &find_message(&listed[..4]),
        ),
    ] {
        let reply = proxy.handle(request).await;
        assert_eq!(reply.status(), StatusCode::OK);
        let found = proto::FindFullHashesResponse::decode(reply.body().as_ref()).unwrap();
        assert_eq!(found.matches.len(), 1);
        assert_eq!(found.matches[0].threat.as_ref().unwrap().hash, listed);
    }
    let status = proxy
        .handle(Request::get("/status").body(Bytes::new()).unwrap())
        .await;
    assert_eq!(status.status(), StatusCode::OK);
    let text = String::from_utf8(status.body().to_vec()).unwrap();
    assert!(text.starts_with("updates 1\nlookups 2\n"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_web_page_can_send_is_refused() {
    let list = list();
    let state = tempfile::tempdir().unwrap();
    let proxy = open(&list, state.path()).await;
    let message = update_message(&[(proto::MALWARE_THREAT, 2)]);
    // A no-cors POST may only be text/plain, a form, or multipart.
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let reply = proxy
            .handle(post(UPDATE_PATH, content_type, &message))
            .await;
        assert_eq!(
            reply.status(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type}"
        );
    }
    let mut no_type = post(UPDATE_PATH, "x", &message);
    no_type.headers_mut().remove("content-type");
    assert_eq!(
        proxy.handle(no_type).await.status(),
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    // A GET it can send (an image, a no-cors fetch) lacks the method override.
    let mut plain_get = as_firefox(UPDATE_PATH, &message);
    plain_get.headers_mut().remove("x-http-method-override");
    assert_eq!(
        proxy.handle(plain_get).await.status(),
        StatusCode::FORBIDDEN
    );
    // Whatever it sends is marked as coming from a site, or with its origin.
    let mut cross_site = as_firefox(UPDATE_PATH, &message);
    cross_site
        .headers_mut()
        .insert("sec-fetch-site", "cross-site".parse().unwrap());
    assert_eq!(
        proxy.handle(cross_site).await.status(),
        StatusCode::FORBIDDEN
    );
    let mut with_origin = post(UPDATE_PATH, "application/x-protobuf", &message);
    with_origin
        .headers_mut()
        .insert("origin", "http://evil.example".parse().unwrap());
    assert_eq!(
        proxy.handle(with_origin).await.status(),
        StatusCode::FORBIDDEN
    );
    let put = Request::put(UPDATE_PATH).body(Bytes::new()).unwrap();
    assert_eq!(
        proxy.handle(put).await.status(),
        StatusCode::METHOD_NOT_ALLOWED
    );
    let elsewhere = Request::get("/v4/other").body(Bytes::new()).unwrap();
    assert_eq!(
        proxy.handle(elsewhere).await.status(),
        StatusCode::NOT_FOUND
    );
    let status = proxy.status().await;
    assert_eq!((status.updates, status.lookups), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_update_answers_each_list_at_most_once() {
    let list = list();
    let state = tempfile::tempdir().unwrap();
    let proxy = open(&list, state.path()).await;
    // The amplification probe: the same list asked for many times in one small request.
    let repeated: Vec<(i32, i32)> = (0..4000).map(|k| (proto::MALWARE_THREAT, k % 4)).collect();
    let message = update_message(&repeated);
    let reply = proxy.handle(as_firefox(UPDATE_PATH, &message)).await;
    assert_eq!(reply.status(), StatusCode::BAD_REQUEST);
    assert!(reply.body().len() < 200, "{} bytes", reply.body().len());
    let twice = update_message(&[(proto::MALWARE_THREAT, 2), (proto::MALWARE_THREAT, 2)]);
    let reply = proxy
        .handle(post(UPDATE_PATH, "application/x-protobuf", &twice))
        .await;
    assert_eq!(reply.status(), StatusCode::BAD_REQUEST);
    assert_eq!(proxy.status().await.updates, 0);
}
