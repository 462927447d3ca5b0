#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Crypto
import ShadowApple
public import ShadowCore
public import ShadowDPoP
public import ShadowJWKS
public import ShadowVault

/// A valid access token, as a ``TokenSource`` hands it out.
public struct AccessToken: Sendable, CustomStringConvertible {
    /// The bearer token. It is a credential: do not log it.
    public let token: SecretBytes
    public let expiresAt: Date
    public let scope: String?
    /// True when this call refreshed it (in this process or, by the lock, in another).
    public let refreshed: Bool
    /// Things the caller should tell a person, such as a Google refresh token near its 90-day end.
    public let warnings: [String]
    /// `Bearer`, or `DPoP` for a token bound to the source's key: send it as `Authorization: DPoP`
    /// with a proof by ``TokenSource/dpopSigner()`` (Docs/dpop.md).
    public var tokenType = "Bearer"

    public var description: String {
        "AccessToken(expires \(Timestamp.rfc3339Exact(expiresAt)), redacted)"
    }
}

/// How a token source is stored in the vault (Docs/token-source.md): for a source named `NAME`,
///
/// - `NAME`: the refresh token (kind `refresh-token`) and the settings, as labels;
/// - `NAME.access`: the current access token (kind `access-token`, with its expiry);
/// - `NAME.client-secret`: the client secret (for Apple, the last one made, with its expiry);
/// - `NAME.p8`: for Apple, the `.p8` key the client secret is made from;
/// - `NAME.dpop`: for a provider that binds tokens, the P-256 private key (32 bytes) its DPoP
///   proofs are signed with; NAME's label `oauth.dpop` is then `ES256`.
public enum TokenSourceEntries {
    public static func access(_ name: String) -> String { name + ".access" }
    public static func clientSecret(_ name: String) -> String { name + ".client-secret" }
    public static func p8(_ name: String) -> String { name + ".p8" }
    public static func dpop(_ name: String) -> String { name + ".dpop" }

    /// The longest name a source of `client` can have: 248 bytes, so that `NAME.access` (and
    /// `NAME.dpop`, `NAME.p8`) is a vault entry name of at most 255 bytes; 241 for a client that
    /// authenticates with a secret, whose `NAME.client-secret` must be one too.
    public static func maxNameBytes(for client: OAuthClient) -> Int {
        VaultEntry.maxNameBytes - (client.authentication == .none ? ".access" : ".client-secret").utf8.count
    }

    /// Why `name` cannot name a source of `client`, or nil when it can: printable text of 1 to
    /// ``maxNameBytes(for:)`` bytes. A longer one would be refreshed and its answer then refused
    /// by the vault, losing the refresh token the provider rotated to.
    public static func nameProblem(_ name: String, client: OAuthClient) -> String? {
        let limit = maxNameBytes(for: client)
        guard VaultEntry.isValidName(name) || name.utf8.count > VaultEntry.maxNameBytes else {
            return "a token source's name is 1 to \(limit) bytes of printable text"
        }
        guard name.utf8.count <= limit else {
            let companion = client.authentication == .none ? "NAME.access" : "NAME.client-secret"
            return """
                a token source's name is 1 to \(limit) bytes of printable text here, so that \(companion) fits \
                the vault's 255: this one is \(name.utf8.count) bytes
                """
        }
        return nil
    }

    /// NAME's label that says proofs are sent, with the algorithm (`ES256`).
    public static let dpopLabel = "oauth.dpop"
    static let tokenType = "oauth.token_type"

    /// The signer of `name`'s DPoP proofs (``TokenSource/dpopSigner()``), read from `vault`.
    public static func dpopSigner(in vault: TokenVault, name: String) async throws -> DPoPSigner? {
        let entry = try await vault.entry(named: name)
        guard let algorithm = entry.labels[dpopLabel] else { return nil }
        guard algorithm == "ES256", let key = try? await vault.entry(named: dpop(name)),
            let signing = key.secret.withUnsafeBytes({ try? P256.Signing.PrivateKey(rawRepresentation: $0) })
        else {
            throw TokenError(
                .notConfigured,
                "\(name.quotedForMessage) sends DPoP proofs, but \(dpop(name).quotedForMessage) holds no P-256 key: "
                    + "run vault login again")
        }
        return try DPoPSigner.es256(signing)
    }

    /// A new DPoP key for `name` (kind `key`, the raw 32-byte P-256 scalar), and its signer.
    public static func newDPoPKey(for name: String, provider: VaultEntry.Provider) throws -> (VaultEntry, DPoPSigner) {
        let key = P256.Signing.PrivateKey()
        let entry = VaultEntry(
            name: dpop(name), secret: SecretBytes(key.rawRepresentation), provider: provider, kind: .key,
            labels: [dpopLabel: "ES256"])
        return (entry, try DPoPSigner.es256(key))
    }

    /// Why `name` cannot be set up as a token source in `contents` without replacing an entry
    /// that is not part of one, or nil when it can: NAME must be absent or a token source already
    /// (a refresh-token entry with its token endpoint), and a new source takes no entry already
    /// named like its companions (`NAME.access`, `.client-secret`, `.p8`, `.dpop`).
    package static func conflict(in contents: VaultContents, name: String) -> String? {
        if let existing = contents.entry(named: name) {
            guard existing.kind == .refreshToken, existing.labels[tokenEndpoint] != nil else {
                let kind = existing.kind.rawValue
                return "\(name.quotedForMessage) holds an entry of kind \(kind) that is not a token source"
            }
            return nil
        }
        let companions = [access(name), clientSecret(name), p8(name), dpop(name)]
        guard let taken = companions.first(where: { contents.entry(named: $0) != nil }) else { return nil }
        return "\(taken.quotedForMessage) exists and is not part of a token source \(name.quotedForMessage)"
    }

    static let preset = "oauth.preset"
    static let tokenEndpoint = "oauth.token_endpoint"
    static let clientID = "oauth.client_id"
    static let authentication = "oauth.auth"
    static let scope = "oauth.scope"
    static let issuedAt = "oauth.refresh_issued_at"
    static let reauthentication = "oauth.reauthentication"
    static let teamID = "apple.team_id"
    static let keyID = "apple.key_id"

    /// The settings' labels for a new refresh-token entry.
    public static func labels(client: OAuthClient, scope: String?, issuedAt time: Date) -> VaultLabels {
        var labels: VaultLabels = [
            preset: client.preset.rawValue, tokenEndpoint: client.tokenEndpoint, clientID: client.clientID,
            authentication: client.authentication.rawValue,
            issuedAt: String(Int64(time.timeIntervalSince1970)),
        ]
        if let scope { labels[Self.scope] = scope }
        return labels
    }

    /// The labels of Apple's `.p8` entry.
    public static func appleKeyLabels(teamID: String, keyID: String) -> VaultLabels {
        [Self.teamID: teamID, Self.keyID: keyID]
    }

    static func client(from entry: VaultEntry) throws -> OAuthClient {
        let labels = entry.labels
        guard let presetName = labels[preset], let preset = OAuthClient.Preset(rawValue: presetName),
            let clientID = labels[clientID]
        else {
            throw TokenError(
                .notConfigured,
                "\(entry.name.quotedForMessage) is not set up for refreshing: store it with `vault login`")
        }
        var authentication: OAuthClient.Authentication?
        if let name = labels[Self.authentication] {
            guard let known = OAuthClient.Authentication(rawValue: name) else {
                throw TokenError(.notConfigured, "unknown client authentication \(name.quotedForMessage)")
            }
            authentication = known
        }
        return try OAuthClient(
            preset: preset, tokenEndpoint: labels[tokenEndpoint], clientID: clientID, authentication: authentication)
    }
}

/// Hands out a valid access token for a vault entry, refreshing it when it is within `skew` of
/// its expiry (Docs/token-source.md).
///
/// - Refreshes are single-flight: concurrent callers in one process share one refresh, and
///   processes take the lock file `<vault>.refresh.lock`, re-reading the vault once they hold it,
///   so twenty processes near expiry cause one request.
/// - The new access token and the rotated refresh token are written to the vault in one atomic
///   write before the access token is returned.
/// - `invalid_grant` marks the entry and throws ``TokenErrorCode/reauthenticationRequired``;
///   every later call throws it at once, without a request, until `vault login` stores a new
///   refresh token. 5xx, 429 and transport failures are retried with jittered back-off,
///   honouring `Retry-After`.
public actor TokenSource {
    public nonisolated let name: String
    let vault: TokenVault
    let transport: any HTTPTransport
    let skew: Duration
    let policy: OAuthTokenEndpoint.Policy
    let clock: WallClock
    let lockTimeout: Duration
    private var inFlight: Task<AccessToken, any Error>?

    /// A Google refresh token this close to its 90-day end is warned about.
    public static let refreshWarning: TimeInterval = 14 * 86_400

    public init(
        vault: TokenVault, name: String, transport: any HTTPTransport, skew: Duration = .seconds(60),
        policy: OAuthTokenEndpoint.Policy = OAuthTokenEndpoint.Policy(), lockTimeout: Duration = .seconds(30),
        clock: WallClock = .system
    ) throws {
        guard skew >= .zero, skew <= .seconds(86_400) else {
            throw TokenError(.notConfigured, "the skew is 0 to 86400 seconds")
        }
        guard lockTimeout >= .zero, lockTimeout <= .seconds(3600) else {
            throw TokenError(.notConfigured, "the lock timeout is 0 to 3600 seconds")
        }
        self.vault = vault
        self.name = name
        self.transport = transport
        self.skew = skew
        self.policy = policy
        self.lockTimeout = lockTimeout
        self.clock = clock
    }

    /// A valid access token: the stored one while it has more than the skew left, else a new one.
    public func token() async throws -> AccessToken {
        if let inFlight { return try await inFlight.value }
        let task = Task { try await self.obtain() }
        inFlight = task
        defer { inFlight = nil }
        return try await task.value
    }

    private func obtain() async throws -> AccessToken {
        if let current = try await current() { return current }
        let lockPath = vault.refreshLockPath
        let timeout = lockTimeout.inSeconds
        guard let lock = try await runBlocking({ try FileLock.acquire(lockPath, timeout: timeout) }) else {
            throw TokenError(.lockTimeout, "another process held the refresh lock for more than \(lockTimeout)")
        }
        defer { lock.release() }
        // Another process may have refreshed while this one waited. A refresh whose entry another
        // writer changed meanwhile (a new sign-in) starts again from what is stored.
        for _ in 0..<Self.maxAttempts {
            if var current = try await current() {
                current = AccessToken(
                    token: current.token, expiresAt: current.expiresAt, scope: current.scope, refreshed: true,
                    warnings: current.warnings, tokenType: current.tokenType)
                return current
            }
            if let refreshed = try await refresh() { return refreshed }
        }
        throw TokenError(
            .lockTimeout,
            "\(name.quotedForMessage) changed during each of \(Self.maxAttempts) refreshes: another writer keeps "
                + "replacing it")
    }

    /// Refreshes tried under one hold of the lock, each after another writer changed the entry.
    static let maxAttempts = 3

    /// The stored access token if it is still good; nil when a refresh is due. One read of the
    /// vault gives both entries.
    private func current() async throws -> AccessToken? {
        let vault = self.vault
        let name = self.name
        let (refreshEntry, access) = try await runBlocking {
            let contents = try vault.contents()
            guard let refresh = contents.entry(named: name) else {
                throw VaultError(.noSuchEntry, "no entry named \(name.quotedForMessage)")
            }
            return (refresh, contents.entry(named: TokenSourceEntries.access(name)))
        }
        if refreshEntry.labels[TokenSourceEntries.reauthentication] != nil {
            throw TokenError(
                .reauthenticationRequired,
                "\(name.quotedForMessage) needs a new sign-in: the provider refused its refresh token (vault login)")
        }
        guard let access, let expiresAt = access.expiresAt, expiresAt.timeIntervalSince(clock.now) > skew.inSeconds
        else { return nil }
        return AccessToken(
            token: access.secret, expiresAt: expiresAt, scope: access.labels[TokenSourceEntries.scope],
            refreshed: false, warnings: warnings(refreshEntry),
            tokenType: access.labels[TokenSourceEntries.tokenType] ?? "Bearer")
    }

    /// The signer of the source's DPoP proofs, when its entry has a key (`NAME.dpop`); nil for a
    /// bearer source. A resource request with a `DPoP` token carries a proof by it.
    public func dpopSigner() async throws -> DPoPSigner? {
        try await TokenSourceEntries.dpopSigner(in: vault, name: name)
    }

    private func warnings(_ entry: VaultEntry) -> [String] {
        guard let client = try? TokenSourceEntries.client(from: entry),
            let lifetime = client.preset.refreshTokenLifetime,
            let issued = entry.labels[TokenSourceEntries.issuedAt].flatMap(Int64.init)
        else { return [] }
        let end = Date(timeIntervalSince1970: Double(issued) + lifetime)
        let left = end.timeIntervalSince(clock.now)
        guard left < Self.refreshWarning else { return [] }
        if left <= 0 {
            return ["the \(client.preset.rawValue) refresh token of \(name.quotedForMessage) is past its 90-day life"]
        }
        return [
            """
            the \(client.preset.rawValue) refresh token of \(name.quotedForMessage) reaches the end of its 90-day \
            life at \(Timestamp.rfc3339Exact(end)): sign in again (vault login) before then
            """
        ]
    }

    /// Refreshes, under the lock: the request, then one vault write of both tokens, made only if
    /// the entry is still the one the request was made for. Nil when another writer changed or
    /// removed it meanwhile (`vault login`, `vault rm`): the answer belongs to a grant the vault
    /// no longer holds, and is dropped.
    private func refresh() async throws -> AccessToken? {
        var refreshEntry = try await vault.entry(named: name)
        let read = refreshEntry
        let client = try TokenSourceEntries.client(from: refreshEntry)
        // Before the request: an answer the vault cannot store (NAME.access over its 255 bytes)
        // would spend the refresh token and lose the one the provider rotated it to.
        if let problem = TokenSourceEntries.nameProblem(name, client: client) {
            throw TokenError(.notConfigured, problem)
        }
        let endpoint = try OAuthTokenEndpoint(
            client: client, transport: transport, policy: policy, dpop: try await dpopSigner())
        let secret = try await clientSecret(client)
        let scope = refreshEntry.labels[TokenSourceEntries.scope]
        let response: TokenResponse
        do {
            response = try await endpoint.refresh(refreshEntry.secret, clientSecret: secret)
        } catch let error as TokenError where error.code == .reauthenticationRequired {
            // Only the refresh token the provider refused is marked, not one stored meanwhile.
            refreshEntry.labels[TokenSourceEntries.reauthentication] = "required"
            guard try await vault.put(contentsOf: [refreshEntry], ifUnchanged: read) else { return nil }
            throw error
        }
        let now = clock.now
        let expiresAt = now.addingTimeInterval(Double(response.expiresIn))
        var access = VaultEntry(
            name: TokenSourceEntries.access(name), secret: response.accessToken,
            provider: refreshEntry.provider, kind: .accessToken, subject: refreshEntry.subject, expiresAt: expiresAt)
        if let granted = response.scope ?? scope { access.labels[TokenSourceEntries.scope] = granted }
        access.labels[TokenSourceEntries.tokenType] = response.tokenType
        if let rotated = response.refreshToken {
            refreshEntry.secret = rotated
            refreshEntry.labels[TokenSourceEntries.issuedAt] = String(Int64(now.timeIntervalSince1970))
        }
        // One atomic write: a crash before it keeps the old pair, after it the new pair.
        guard try await vault.put(contentsOf: [refreshEntry, access], ifUnchanged: read) else { return nil }
        return AccessToken(
            token: response.accessToken, expiresAt: expiresAt, scope: access.labels[TokenSourceEntries.scope],
            refreshed: true, warnings: warnings(refreshEntry), tokenType: response.tokenType)
    }

    /// The client secret: none for a public client; the stored one; for Apple, the last one
    /// made while it has more than five minutes left, else a new one made from the `.p8` key.
    private func clientSecret(_ client: OAuthClient) async throws -> SecretBytes? {
        guard client.authentication != .none else { return nil }
        let stored = try? await vault.entry(named: TokenSourceEntries.clientSecret(name))
        guard client.preset == .apple else {
            guard let stored else {
                throw TokenError(
                    .notConfigured,
                    "no client secret: store one as \(TokenSourceEntries.clientSecret(name).quotedForMessage)")
            }
            return stored.secret
        }
        if let stored, let expiresAt = stored.expiresAt, expiresAt.timeIntervalSince(clock.now) > 300 {
            return stored.secret
        }
        guard let key = try? await vault.entry(named: TokenSourceEntries.p8(name)),
            let teamID = key.labels[TokenSourceEntries.teamID], let keyID = key.labels[TokenSourceEntries.keyID]
        else {
            throw TokenError(
                .notConfigured, "no .p8 key: store Apple's key as \(TokenSourceEntries.p8(name).quotedForMessage)")
        }
        let made: ClientSecret
        do {
            let signing = try AppleSigningKey(pem: key.secret.utf8String)
            let builder = try ClientSecretBuilder(
                key: signing, teamID: teamID, keyID: keyID, clientID: client.clientID)
            made = try builder.make(issuedAt: clock.now)
        } catch let error as AppleError {
            throw TokenError(.notConfigured, "the .p8 key: \(error.reason)")
        }
        // Kept only while the key it was made with is the stored one.
        _ = try await vault.put(
            contentsOf: [
                VaultEntry(
                    name: TokenSourceEntries.clientSecret(name), secret: SecretBytes(utf8: made.token),
                    provider: .apple, kind: .other, expiresAt: made.expiresAt)
            ], ifUnchanged: key)
        return SecretBytes(utf8: made.token)
    }
}
