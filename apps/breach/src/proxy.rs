//! The logic of `pir breach proxy`: HIBP's `GET /range/{prefix}` answered by one private
//! bucket retrieval, byte for byte as api.pwnedpasswords.com formats it, for clients that
//! already speak the range API (password managers, HIBP libraries).
//!
//! [`RangeProxy::handle`] answers a request as plain `http` types (routing, method, the
//! `Add-Padding` header); [`RangeProxy::answer`] is the range call itself. The listener around
//! it is `pir_server::local` (joined by the binary): loopback addresses only, only loopback
//! `Host` names (a web page that rebinds its name to 127.0.0.1 is refused), bounded
//! connections, timeouts and bodies. The proxy sees each prefix in the clear, so it belongs on
//! the user's own machine.

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use pir_client::{HttpsTransport, Transport};

use crate::header::DbHeader;
use crate::range::{range_response, RangePrefix};
use crate::{BreachError, BreachSession};

/// A reply of the range API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeReply {
    /// HTTP status: 200, 400 for a bad request, 502 when the private retrieval failed.
    pub status: u16,
    /// `text/plain` body.
    pub body: String,
}

impl RangeReply {
    fn error(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            body: body.into(),
        }
    }
}

/// A session with a breach deployment whose database can serve the range API.
pub struct RangeProxy<T = HttpsTransport> {
    session: BreachSession<T>,
    header: DbHeader,
}

impl<T> std::fmt::Debug for RangeProxy<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeProxy").finish_non_exhaustive()
    }
}

impl<T: Transport> RangeProxy<T> {
    /// A proxy over `session`; refuses databases that cannot serve the range API (not SHA-1,
    /// or truncated hashes).
    pub fn new(session: BreachSession<T>, header: DbHeader) -> Result<Self, BreachError> {
        RangePrefix::parse("00000")?.bucket(&header)?;
        Ok(Self { session, header })
    }

    /// Answers one request: `GET /range/{prefix}` as api.pwnedpasswords.com does, 404 for
    /// other paths, 405 for other methods.
    pub async fn handle(&self, request: Request<Bytes>) -> Response<Bytes> {
        let Some(prefix) = request.uri().path().strip_prefix("/range/") else {
            return text(
                404,
                "this proxy answers GET /range/{first 5 hex digits of SHA-1}\n",
            );
        };
        if request.method() != Method::GET {
            let mut refused = text(405, "the range API answers GET\n");
            refused
                .headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("GET"));
            return refused;
        }
        let padding = request
            .headers()
            .get("add-padding")
            .and_then(|v| v.to_str().ok());
        let reply = self.answer(prefix, request.uri().query(), padding).await;
        text(reply.status, &reply.body)
    }

    /// Answers `GET /range/{prefix}?{query}` with the given `Add-Padding` header value.
    pub async fn answer(
        &self,
        prefix: &str,
        query: Option<&str>,
        add_padding: Option<&str>,
    ) -> RangeReply {
        let mode = query
            .unwrap_or("")
            .split('&')
            .find_map(|pair| pair.strip_prefix("mode="))
            .unwrap_or("sha1");
        if mode.eq_ignore_ascii_case("ntlm") {
            return RangeReply::error(
                400,
                "NTLM mode is not available: this corpus holds SHA-1 hashes only; use mode=sha1\n",
            );
        }
        if !mode.eq_ignore_ascii_case("sha1") {
            return RangeReply::error(
                400,
                format!("unknown mode {mode:?}; this proxy answers mode=sha1\n"),
            );
        }
        let Ok(prefix) = RangePrefix::parse(prefix) else {
            return RangeReply::error(400, "The hash prefix was not in a valid format\n");
        };
        let padding = add_padding.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let bucket = match prefix.bucket(&self.header) {
            Ok(bucket) => bucket,
            Err(e) => return RangeReply::error(500, format!("{e}\n")),
        };
        let block = match self.session.retrieve(bucket).await {
            Ok(block) => block,
            Err(e) => return RangeReply::error(502, format!("private retrieval failed: {e}\n")),
        };
        let decoded = match self.header.decode_bucket(&block) {
            Ok(decoded) => decoded,
            Err(e) => return RangeReply::error(502, format!("bad bucket from the servers: {e}\n")),
        };
        let mut rng = rand::rng();
        match range_response(&self.header, prefix, &decoded, padding.then_some(&mut rng)) {
            Ok(body) => RangeReply { status: 200, body },
            Err(e) => RangeReply::error(500, format!("{e}\n")),
        }
    }
}

/// A `text/plain` response.
fn text(status: u16, body: &str) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(body.to_string()));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    response
}
