/// The fuzz harnesses: one per parser of outside bytes. Each takes arbitrary bytes, runs the
/// parser, and where the format has a writer checks that what was parsed writes back and parses
/// to the same value. A violated invariant is a `precondition` failure, which libFuzzer reports
/// as a crash.
///
/// `FuzzTesting/` builds these into a libFuzzer binary; `FuzzRegressionTests` replays every seed
/// and every input that ever failed through the same functions in `swift test`.
public enum FuzzTargets {
    /// A harness: bytes in, nothing out; it traps on a broken invariant.
    public typealias Harness = @Sendable (UnsafeRawBufferPointer) -> Void

    /// Every harness by name, in a stable order.
    public static let all: [(name: String, summary: String, run: Harness)] = [
        ("json", "the strict I-JSON reader, and serialize-parse round trips", CoreTargets.json),
        ("base64url", "canonical unpadded base64url: decode, and re-encode to the same text", CoreTargets.base64URL),
        ("time", "epoch seconds and RFC 3339 times, and their RFC 3339 round trip", CoreTargets.time),
        ("lines", "stdin split into lines in uneven reads, over-long lines skipped by length", CoreTargets.lines),
        ("jws", "compact JWS splitting, headers, payloads, and verification against fixed keys", JOSETargets.jws),
        ("bearer", "Authorization: Bearer headers, and the token put back behind the scheme", JOSETargets.bearer),
        ("jwk", "one JWK, and its canonical form read back", JOSETargets.jwk),
        (
            "key-file", "PEM and JWK key files, and a token from a private one verified by its public key set",
            JOSETargets.keyFile
        ),
        ("jwks", "a JWK Set document, and its usable keys written and read back", JOSETargets.jwks),
        (
            "http-caching", "Cache-Control, Expires, Date and Retry-After, and HTTP-date round trips",
            JWKSTargets.httpCaching
        ),
        ("jwks-cache", "the key-set cache file, and its canonical re-encoding", JWKSTargets.cacheFile),
        (
            "apple-identity", "Apple identity-token claims through Apple's policy and the typed token",
            AppleTargets.identityToken
        ),
        (
            "apple-notification", "notification bodies, and notification claims through the policy and event reader",
            AppleTargets.notification
        ),
        ("p8", "Sign in with Apple .p8 keys (PEM), and a client secret from one", AppleTargets.p8),
        ("envelope-header", "the envelope header, and its serialization", CryptoTargets.envelopeHeader),
        (
            "envelope", "record and stream envelopes opened with a fixed key, fed in uneven pieces",
            CryptoTargets.envelope
        ),
        ("manifest", "sha256sum manifests, and each line formatted and parsed back", CryptoTargets.manifest),
        ("vault", "vault files opened with a fixed key, and vault bodies decoded and re-encoded", VaultTargets.vault),
        ("audit-log", "audit-log lines and chains under a fixed key, and line round trips", CredentialTargets.auditLog),
        (
            "state-db", "database-store rows, sealed secrets, audit heads and apply-events lines, with round trips",
            StateDBTargets.stateDB
        ),
        ("postgres-url", "PostgreSQL URLs read as libpq reads them", StoreURLTargets.postgresURL),
        ("proxy", "HTTPS_PROXY and NO_PROXY as curl reads them, and hosts matched against them", ProxyTargets.proxy),
        (
            "forwarded", "Forwarded and X-Forwarded-For from a trusted proxy, and form bodies read back",
            ServerTargets.forwarded
        ),
        (
            "oplog", "operation-log entries, signed checkpoints, witness files and log files, with round trips",
            OperationLogTargets.oplog
        ),
        ("refresh-token", "session refresh tokens, authenticated and re-encoded", SessionTargets.refreshToken),
        ("dpop", "DPoP proofs checked for one request, and HTTP target URIs normalized twice", DPoPTargets.proof),
        (
            "oauth", "token-endpoint answers and errors, Retry-After values, and pasted redirect URLs",
            SessionTargets.oauth
        ),
        (
            "argv",
            "verify-token, vault, encrypt and decrypt command lines: the direct readers against argument-parser",
            CommandLineTargets.argv
        ),
    ]

    /// Builds every harness's fixtures (keys, verifiers) now, so that the leak checker does not
    /// take a one-time fixture built during the first input for a leak.
    public static func prepare() {
        _ = (JOSETargets.keys, JOSETargets.verifier, JOSETargets.signer, JWKSTargets.now, JWKSTargets.url)
        _ = (
            AppleTargets.validator, AppleTargets.notificationVerifier, AppleTargets.header, AppleTargets.key,
            AppleTargets.now
        )
        _ = (
            CryptoTargets.kek, CryptoTargets.contexts, VaultTargets.unlock, CredentialTargets.keys, StateDBTargets.keys
        )
        _ = (OperationLogTargets.keys, OperationLogTargets.verifier, OperationLogTargets.unlock, SessionTargets.keys)
    }

    /// The harness named `name`, if there is one.
    public static func harness(named name: String) -> Harness? {
        all.first { $0.name == name }?.run
    }

    /// Runs the harness `name` on `bytes`.
    public static func run(_ name: String, _ bytes: [UInt8]) {
        guard let harness = harness(named: name) else { preconditionFailure("no fuzz harness named \(name)") }
        bytes.withUnsafeBytes { harness($0) }
    }
}

/// Splits harness input: the first byte selects a mode, the rest is the input proper.
struct Input {
    let mode: UInt8
    let rest: [UInt8]

    init(_ data: UnsafeRawBufferPointer) {
        mode = data.first ?? 0
        rest = Array(data.dropFirst())
    }
}

/// `body`'s result; its error stops the harness with `what` in the message: a step that must not
/// fail on input the parsers accepted (a crash there is a finding).
func must<R>(_ what: String, _ body: () throws -> R) -> R {
    do { return try body() } catch { preconditionFailure("\(what) failed: \(error)") }
}
