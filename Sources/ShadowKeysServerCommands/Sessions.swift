import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import ServiceLifecycle
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowDPoP
import ShadowJOSE
import ShadowKeysCommands
import ShadowServer
import ShadowSessions
import ShadowOperationLog
import ShadowPostgres
import ShadowSQLite
import ShadowVault

/// The session settings `serve` and `sessions` share (Docs/sessions.md).
struct SessionOptions: ParsableArguments {
    @Option(
        name: .customLong("sessions-issuer"),
        help: "Offer first-party sessions, with this issuer URL (the access tokens' iss).") var issuer: String?
    @Option(name: .customLong("sessions-audience"), help: "The access tokens' aud (default: the issuer).")
    var audience: String?
    @Option(
        name: .customLong("sessions-client-id"), help: "The access tokens' client_id (default: the first --client-id).")
    var clientID: String?
    @Option(name: .customLong("sessions-alg"), help: "ES256 (default) or RS256.") var algorithm = "ES256"
    @Option(name: .customLong("access-token-lifetime"), help: "Seconds (60 to 86400, default 3600).")
    var accessLifetime: Double = 3600
    @Option(
        name: .customLong("refresh-grace"), help: "Seconds an old refresh token still gets its successor (0 to 300).")
    var grace: Double = 10
    @Option(
        name: .customLong("introspection-clients"),
        help: "A file of id:secret lines: the clients allowed /auth/revoke and /auth/introspect.")
    var introspectionFile: String?
    @Option(name: .customLong("rate-limit-ip"), help: "Requests a minute per client IP on /auth/* (1 to 100000).")
    var ipLimit = 60
    @Option(name: .customLong("rate-limit-user"), help: "Requests a minute per user or session (1 to 100000).")
    var userLimit = 30
    @Flag(
        name: .customLong("require-dpop"),
        help: "Bind every session to a DPoP key: refuse sign-ins without a proof and bearer access tokens.")
    var requireDPoP = false
    @Flag(
        name: .customLong("dpop-nonce"),
        help: "Require the server's DPoP-Nonce in every proof (RFC 9449 §8, §9).")
    var dpopNonce = false
    @Option(name: .customLong("dpop-max-age"), help: "Seconds a DPoP proof is accepted after its iat (1 to 3600).")
    var dpopMaxAge: Double = 60

    var enabled: Bool { issuer != nil }

    func validate(clientIDs: [String], revokes: Bool) throws {
        guard let issuer else {
            if introspectionFile != nil || audience != nil || clientID != nil || requireDPoP || dpopNonce {
                throw ValidationError("the session options need --sessions-issuer")
            }
            return
        }
        guard
            issuer.hasPrefix("https://") || issuer.hasPrefix("http://127.0.0.1") || issuer.hasPrefix("http://localhost")
        else { throw ValidationError("--sessions-issuer: an https:// URL") }
        guard revokes else {
            throw ValidationError("sessions exchange Apple's authorization code: give --p8, --team-id and --key-id")
        }
        _ = try configuration(clientIDs: clientIDs)
        guard (1...100_000).contains(ipLimit), (1...100_000).contains(userLimit) else {
            throw ValidationError("--rate-limit-ip and --rate-limit-user: 1 to 100000 a minute")
        }
        guard (1...3600).contains(dpopMaxAge) else { throw ValidationError("--dpop-max-age: 1 to 3600 seconds") }
    }

    func configuration(clientIDs: [String]) throws -> SessionConfiguration {
        guard let issuer else { throw ValidationError("give --sessions-issuer") }
        var configuration = SessionConfiguration(
            issuer: issuer, audience: audience ?? issuer, clientID: clientID ?? clientIDs.first ?? "")
        guard let algorithm = JWSAlgorithm(rawValue: algorithm), [.es256, .rs256].contains(algorithm) else {
            throw ValidationError("--sessions-alg: ES256 or RS256")
        }
        configuration.algorithm = algorithm
        configuration.accessTokenLifetime = accessLifetime
        configuration.grace = grace
        configuration.requireDPoP = requireDPoP
        do { try configuration.validate() } catch let error as SessionError {
            throw ValidationError("the session options: \(error.reason)")
        }
        return configuration
    }

    /// `id:secret` lines (a line may end in CR LF); a secret never comes from argv. An ID given
    /// twice is refused, not overwritten.
    func introspectionClients() throws -> [String: SecretBytes] {
        guard let introspectionFile else { return [:] }
        warnIfReadableByOthers(introspectionFile, what: "introspection clients file")
        let bytes: [UInt8]
        do {
            guard let read = try Files.read(introspectionFile, limit: 64 << 10) else {
                throw ValidationError("--introspection-clients: the file is over 64 KiB")
            }
            bytes = read
        } catch let error as FileError {
            throw CLIError(.noInput, "--introspection-clients: \(error)")
        }
        var clients: [String: SecretBytes] = [:]
        // Read as bytes: a String would take CR LF as one character, never split at "\n".
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        for (number, whole) in lines.enumerated() {
            let line = whole.last == UInt8(ascii: "\r") ? whole.dropLast() : whole
            if line.isEmpty { continue }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                colon + 1 < line.endIndex
            else {
                throw ValidationError("--introspection-clients: each line is id:secret (line \(number + 1) is not)")
            }
            let id = String(decoding: line[..<colon], as: UTF8.self)
            guard clients.updateValue(SecretBytes(line[(colon + 1)...]), forKey: id) == nil else {
                throw ValidationError("--introspection-clients: the client ID \(id.quotedForMessage) is given twice")
            }
        }
        return clients
    }

    func start(
        store storeOptions: StoreOptions, database: ServerDatabase, states: any CredentialStateStore,
        clientIDs: [String], keys: any JWKSource, appleClients: [String: AppleAuthClient],
        introspectionClients: [String: SecretBytes], logger: Logger
    ) async throws -> (endpoints: SessionEndpoints, service: SessionService) {
        let store = try await database.sessionStore(storeOptions)
        let configuration = try configuration(clientIDs: clientIDs)
        let log = try await Self.openAuthenticationLog(
            storeOptions, database: database, issuer: configuration.issuer, logger: logger)
        let authority = try await SessionAuthority(store: store, configuration: configuration, events: log.events)
        var limits = SessionEndpoints.Limits()
        limits.perIP = .perMinute(ipLimit)
        limits.perUser = .perMinute(userLimit)
        let dpop = DPoPPolicy(
            verifier: DPoPVerifier(maxAge: dpopMaxAge), nonces: dpopNonce ? try authority.dpopNonces() : nil)
        let endpoints = SessionEndpoints(
            authority: authority, validator: AppleIdentityTokenValidator(clientIDs: clientIDs), appleKeys: keys,
            appleClients: appleClients, limits: limits, introspectionClients: introspectionClients,
            states: states, dpop: dpop, logger: logger)
        return (
            endpoints,
            SessionService(authority: authority, appleClients: appleClients, logger: logger)
        )
    }
}

extension SessionOptions {
    /// The authentication log: an operation log in the same store (Docs/sessions.md,
    /// "Authentication log"), named `<issuer host and path>/auth-log`.
    static func openAuthenticationLog(
        _ store: StoreOptions, database: ServerDatabase, issuer: String, logger: Logger
    ) async throws -> AuthenticationLog {
        // The store's log keeps the name it was made with; a new one gets the issuer's.
        let storage: any LogStorage
        do {
            storage = try await database.logStorage(store, create: false, origin: nil)
        } catch let error as LogError where error.code == .notFound {
            storage = try await database.logStorage(
                store, create: true, origin: AuthenticationLog.origin(issuer: issuer))
        }
        return AuthenticationLog(log: try OperationLog(storage: storage), logger: logger)
    }
}

/// Keeps sessions in shape while `serve` runs: the key schedule, the sweep of dead sessions (each
/// batch examining the next 1,000 rows of each table), and the monthly re-check with Apple; every
/// minute, each step whatever the others did (`SessionAuthority.upkeep`).
struct SessionService: Service {
    let authority: SessionAuthority
    let appleClients: [String: AppleAuthClient]
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await once()
                try? await Task.sleep(for: .seconds(60))
            }
        }
    }

    func once() async {
        // Without an Apple client for the sessions' client ID, Apple cannot be asked: no re-check.
        let check = appleClients[authority.configuration.clientID].map { client in
            { @Sendable (token: SecretBytes) in await Self.ask(client, token) }
        }
        let report = await authority.upkeep(recheck: check)
        if report.rotated { logger.info("rotated the access-token signing key") }
        for failure in report.failures {
            logger.warning(
                "session maintenance failed", metadata: ["step": "\(failure.step)", "error": "\(failure.error)"])
        }
    }

    /// Apple's answer to a refresh-token validation: `invalid_grant` means the Apple ID is no longer valid.
    static func ask(_ client: AppleAuthClient, _ token: SecretBytes) async -> SessionAuthority.RecheckOutcome {
        do {
            _ = try await client.refresh(token)
            return .valid
        } catch let error as AppleError where error.code == .invalidGrant {
            return .invalid
        } catch {
            return .unavailable
        }
    }
}

/// `shadow-keys-server sessions …`: the session tables by hand.
struct SessionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sessions",
        abstract: "Manage first-party sessions: signing keys, a user's devices, revocation, the Apple re-check.",
        discussion: """
            Sessions live in the state store (--store sqlite:PATH or postgres://…, and its key options). \
            Exit codes: 0; 30 wrong key; 31 damaged session tables; 64 usage; 66 no store. See Docs/sessions.md.
            """,
        subcommands: [Keys.self, List.self, Revoke.self, Recheck.self])

    struct Common: ParsableArguments {
        @OptionGroup var store: StoreOptions
        @OptionGroup var sessions: SessionOptions
        @Flag(help: "Print JSON.") var json = false
        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func withAuthority<R>(_ body: (SessionAuthority) async throws -> R) async throws -> R {
            if let path = try store.sqlitePath(), !FileManager.default.fileExists(atPath: path) {
                throw CLIError(.noInput, "no state store at \(path)")
            }
            let database = try await ServerDatabase.open(store)
            do {
                let sessionStore = try await database.sessionStore(store)
                var configuration = SessionConfiguration(
                    issuer: sessions.issuer ?? "https://sessions.invalid", audience: sessions.audience ?? "-",
                    clientID: sessions.clientID ?? "-")
                if let algorithm = JWSAlgorithm(rawValue: sessions.algorithm) { configuration.algorithm = algorithm }
                // What these commands do is logged as serve logs it, in the store's authentication log.
                var logger = Logger(label: "shadow-keys.sessions")
                logger.logLevel = .error
                let log = try await SessionOptions.openAuthenticationLog(
                    store, database: database, issuer: configuration.issuer, logger: logger)
                let result = try await body(
                    try await SessionAuthority(store: sessionStore, configuration: configuration, events: log.events))
                await database.close()
                return result
            } catch {
                await database.close()
                throw error
            }
        }
    }

    struct Keys: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "keys",
            abstract: "list: the signing keys; rotate: publish a new key now (it signs after the lead).")
        @Argument(help: "list or rotate") var action: String
        @OptionGroup var common: Common
        var quiet: Bool { common.quiet }

        func validate() throws {
            guard ["list", "rotate"].contains(action) else { throw ValidationError("keys: list or rotate") }
        }

        func run() async throws {
            try await reportingFailures(json: common.json) {
                let keys = try await common.withAuthority { authority in
                    if action == "rotate" { _ = try await authority.rotateKeys() }
                    return try await authority.signingKeys()
                }
                let rows: [JSONValue] = keys.map { key in
                    [
                        "kid": .string(key.keyID), "alg": .string(key.algorithm),
                        "created": .string(Timestamp(milliseconds: key.createdAt)?.rfc3339Exact ?? ""),
                        "signsFrom": .string(Timestamp(milliseconds: key.activatesAt)?.rfc3339Exact ?? ""),
                        "retired": key.retiredAt.flatMap { Timestamp(milliseconds: $0)?.rfc3339Exact }.map(
                            JSONValue.string) ?? .null,
                    ]
                }
                if common.json {
                    Console.json(["keys": .array(rows)])
                } else {
                    for row in rows { Console.json(row) }
                }
            }
        }
    }

    struct List: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "The user's sessions (devices), live and revoked, newest first.")
        @Argument(help: "The user's internal ID (a UUID).") var user: String
        @OptionGroup var common: Common
        var quiet: Bool { common.quiet }

        func validate() throws {
            guard UUID(text: user) != nil else { throw ValidationError("USER: a UUID") }
        }

        func run() async throws {
            try await reportingFailures(json: common.json) {
                guard let user = UUID(text: user) else { throw ValidationError("USER: a UUID") }
                let rows = try await common.withAuthority { try await $0.sessions(user: user) }
                for row in rows {
                    Console.json([
                        "id": .string(row.id.description), "device": .string(row.device),
                        "generation": .int(row.generation),
                        "created": .string(Timestamp(milliseconds: row.createdAt)?.rfc3339Exact ?? ""),
                        "lastUsed": .string(Timestamp(milliseconds: row.lastUsedAt)?.rfc3339Exact ?? ""),
                        "revoked": row.revokedAt.flatMap { Timestamp(milliseconds: $0)?.rfc3339Exact }.map(
                            JSONValue.string) ?? .null,
                    ])
                }
            }
        }
    }

    struct Revoke: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke", abstract: "Revoke one session (its ID) or every session of a user (a UUID).")
        @Argument(help: "A user's UUID, or a session ID.") var target: String
        @OptionGroup var common: Common
        var quiet: Bool { common.quiet }

        func validate() throws {
            guard UUID(text: target) != nil || SessionID(target) != nil else {
                throw ValidationError("give a user's UUID or a session ID")
            }
        }

        func run() async throws {
            try await reportingFailures(json: common.json) {
                let count = try await common.withAuthority { authority -> Int in
                    if let user = UUID(text: target) { return try await authority.revokeAll(user: user) }
                    guard let session = SessionID(target) else {
                        throw ValidationError("give a user's UUID or a session ID")
                    }
                    return try await authority.revoke(session: session) ? 1 : 0
                }
                if common.json { Console.json(["revoked": .int(count)]) } else { Console.out("revoked \(count)") }
            }
        }
    }

    struct Recheck: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "recheck",
            abstract: "Ask Apple about users not checked for 30 days; invalid_grant revokes their sessions.")
        @OptionGroup var common: Common
        var quiet: Bool { common.quiet }
        @OptionGroup var credentials: ClientSecretOptions
        @OptionGroup var apple: AppleEndpointOptions
        @Option(help: "How many users at most (1 to 10000).") var limit = 100

        func validate() throws {
            guard (1...10_000).contains(limit) else { throw ValidationError("--limit: 1 to 10000") }
        }

        func run() async throws {
            try await reportingFailures(json: common.json) {
                let client = try apple.client(credentials)
                let result = try await common.withAuthority { authority in
                    try await authority.recheck(limit: limit) { token in await SessionService.ask(client, token) }
                }
                if common.json {
                    Console.json(["checked": .int(result.checked), "revoked": .int(result.revoked)])
                } else {
                    Console.out("checked \(result.checked), revoked \(result.revoked)")
                }
            }
        }
    }
}
