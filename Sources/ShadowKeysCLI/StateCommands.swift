import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowJOSE

struct StateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "state",
        abstract: "Track each user's credential state (authorized, revoked, transferred, notFound) in the vault.",
        discussion: """
            State lives in the vault (--vault and its key options, as for `vault`); every transition is
            also appended to a hash-chained audit log, the vault's path plus ".audit". Events apply in
            the order of their own times, whatever order they arrive in; duplicates change nothing.
            Exit codes: 0; 14 not authorized (check) or token superseded by a revocation (apply-token);
            10-13 token or notification rejected, as for verify-token; 30 wrong key; 31 vault or audit
            log corrupted or tampered; 33 lock timeout; 64 usage; 66 no vault. See Docs/credential-state.md.
            """,
        subcommands: [Show.self, Check.self, ApplyNotification.self, ApplyToken.self, RecordRefresh.self, RecordMigration.self, History.self, Audit.self]
    )

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a user's state, since when, its cause and any linked subject.")
        @OptionGroup var user: UserOptions
        @OptionGroup var vault: VaultOptions
        @Flag(help: "Print JSON.") var json = false

        func validate() throws { try vault.requireKey() }

        func run() async throws {
            try await reportingFailures(json: json) {
                let status = try credentialStore(vault).recordSync(clientID: user.clientID, subject: user.subject).status
                printStatus(status, user: user, json: json)
            }
        }
    }

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Exit 0 if the user is authorized, 14 otherwise (revoked, transferred or notFound).")
        @OptionGroup var user: UserOptions
        @OptionGroup var vault: VaultOptions
        @Flag(help: "Print the state as JSON.") var json = false

        func validate() throws { try vault.requireKey() }

        func run() async throws {
            try await reportingFailures(json: json) {
                let status = try credentialStore(vault).recordSync(clientID: user.clientID, subject: user.subject).status
                if json { printStatus(status, user: user, json: true) }
                guard status.state == .authorized else {
                    Console.err("shadow-keys: \(user.subject.quotedForMessage) is \(status.state)\(status.since.map { " since \(Timestamp.rfc3339($0))" } ?? "")")
                    throw ExitCode(ExitStatus.credentialRevoked.rawValue)
                }
                if !json { Console.out("authorized") }
            }
        }
    }

    struct ApplyNotification: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "apply-notification",
            abstract: "Verify a server-to-server notification body from stdin and apply its event.",
            discussion: "An undocumented event type is reported and changes nothing (exit 0).")
        @Option(name: .customLong("client-id"), help: "The client ID the state belongs to (default: the notification's aud).")
        var clientID: String?
        @Option(name: .customLong("aud"), help: "An accepted client ID; repeatable. Default: --client-id.")
        var audiences: [String] = []
        @OptionGroup var keySource: KeySourceOptions
        @Option(help: "Verify as of this time: epoch seconds or RFC 3339.") var now: String?
        @Option(help: "Allowed clock skew, seconds.") var leeway: Double = 60
        @OptionGroup var vault: VaultOptions
        @Flag(help: "Print JSON.") var json = false

        var acceptedAudiences: [String] { audiences.isEmpty ? clientID.map { [$0] } ?? [] : audiences }

        func validate() throws {
            try vault.requireKey()
            guard !acceptedAudiences.isEmpty else { throw ValidationError("give --client-id or --aud: the client IDs the notification may be for") }
            if let clientID, !audiences.isEmpty, !audiences.contains(where: { $0.exactlyEquals(clientID) }) {
                throw ValidationError("--client-id must be one of the --aud values")
            }
            try keySource.validate(default: Apple.keysURL)
            if keySource.jwks == "-" || vault.passphrase.fromStdin { throw ValidationError("the notification body comes on stdin; give --jwks and the passphrase another way") }
            try checkLeeway(leeway)
            _ = try parseNow(now)
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let notification = try await readNotification(keySource: keySource, audiences: acceptedAudiences, leeway: leeway, now: now)
                guard let event = try CredentialEvent.notification(notification, clientID: clientID ?? notification.audience) else {
                    Console.err("shadow-keys: warning: unknown notification type \(notification.rawType.quotedForMessage); nothing applied")
                    printChanges([], json: json)
                    return
                }
                printChanges(try credentialStore(vault).applySync([event]), json: json)
            }
        }
    }

    struct ApplyToken: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "apply-token",
            abstract: "Verify a Sign in with Apple identity token and record the sign-in (and any transfer_sub).",
            discussion: """
                Verification is that of `verify-token --apple`. Exit 14 when the sign-in is recorded but the
                token is superseded: its subject was revoked or transferred at or after its iat.
                """)
        @Argument(help: "The token, or '-' to read it from stdin.") var token: String?
        @Option(name: .customLong("token-file"), help: "Read the token from this file.") var tokenFile: String?
        @Option(name: .customLong("token-env"), help: "Read the token from this environment variable.") var tokenEnvironment: String?
        @Option(name: .customLong("client-id"), help: "The client ID the state belongs to (default: the token's aud); --aud defaults to it.")
        var clientID: String?
        @OptionGroup var keySource: KeySourceOptions
        @OptionGroup var options: VerificationOptions
        @OptionGroup var vault: VaultOptions
        @Flag(help: "Print JSON.") var json = false

        private var tokenInput: TokenInput { TokenInput(argument: token, file: tokenFile, environmentVariable: tokenEnvironment) }

        private var appleOptions: VerificationOptions {
            var options = options
            if options.audiences.isEmpty, let clientID { options.audiences = [clientID] }
            return options
        }

        func validate() throws {
            try vault.requireKey()
            try tokenInput.validate()
            try keySource.validate(default: Apple.keysURL)
            try appleOptions.validateApple()
            if let clientID, !options.audiences.isEmpty, !options.audiences.contains(where: { $0.exactlyEquals(clientID) }) {
                throw ValidationError("--client-id must be one of the --aud values")
            }
            let stdinUsers = [tokenInput.usesStdin, keySource.jwks == "-", vault.passphrase.fromStdin].filter { $0 }.count
            if stdinUsers > 1 { throw ValidationError("only one of the token, --jwks and the passphrase can come from stdin") }
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let raw = try tokenInput.read()
                let identity = try await appleOptions.appleValidator().validate(raw, keys: keySource.keys(default: Apple.keysURL))
                let client = clientID ?? identity.audience
                let store = try credentialStore(vault)
                let changes = try store.applySync(try CredentialEvent.signIn(identity, rawToken: raw, clientID: client))
                try store.recordSync(clientID: client, subject: identity.subject).enforce(identity)
                printChanges(changes, json: json)
            }
        }
    }

    struct RecordRefresh: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "record-refresh",
            abstract: "Record the result of validating a user's refresh token: ok, or Apple's invalid_grant (a revocation).")
        @OptionGroup var user: UserOptions
        @Option(help: "ok or invalid_grant.") var result: String
        @Option(help: "When Apple answered: epoch seconds or RFC 3339. Default: now.") var at: String?
        @OptionGroup var vault: VaultOptions
        @Flag(help: "Print JSON.") var json = false

        func validate() throws {
            try vault.requireKey()
            guard ["ok", "invalid_grant"].contains(result) else { throw ValidationError("--result: ok or invalid_grant") }
            _ = try eventTime(at)
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let event = try CredentialEvent.refresh(succeeded: result == "ok", clientID: user.clientID, subject: user.subject, at: try eventTime(at))
                printChanges(try credentialStore(vault).applySync([event]), json: json)
            }
        }
    }

    struct RecordMigration: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "record-migration",
            abstract: "Record an app-transfer migration result: the subject --from is now --to.")
        @Option(name: .customLong("client-id"), help: "The client ID the state belongs to.") var clientID: String
        @Option(help: "The user's subject before the transfer (transfer_sub).") var from: String
        @Option(help: "The user's subject after the transfer.") var to: String
        @Option(help: "When the migration happened: epoch seconds or RFC 3339. Default: now.") var at: String?
        @OptionGroup var vault: VaultOptions
        @Flag(help: "Print JSON.") var json = false

        func validate() throws {
            try vault.requireKey()
            if from.exactlyEquals(to) { throw ValidationError("--from and --to name the same subject") }
            _ = try eventTime(at)
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let event = try CredentialEvent.migration(clientID: clientID, from: from, to: to, at: try eventTime(at))
                printChanges(try credentialStore(vault).applySync([event]), json: json)
            }
        }
    }

    struct History: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a user's transitions from the audit log (checking the log's chain first).")
        @OptionGroup var user: UserOptions
        @OptionGroup var vault: VaultOptions
        @Flag(help: "Print JSON.") var json = false

        func validate() throws { try vault.requireKey() }

        func run() async throws {
            try await reportingFailures(json: json) {
                let entries = try credentialStore(vault).historySync(clientID: user.clientID, subject: user.subject)
                if json {
                    Console.json(["client_id": .string(user.clientID), "sub": .string(user.subject), "entries": .array(entries.map { .object(auditJSON($0)) })])
                    return
                }
                if entries.isEmpty { Console.err("shadow-keys: no transitions recorded for \(user.subject.quotedForMessage)") }
                for entry in entries {
                    Console.out("\(Timestamp.rfc3339(millisecondsToDate(entry.eventTimeMilliseconds)))  \(entry.old) -> \(entry.new)  \(entry.cause.rawValue)  \(entry.eventID.terminalSafe)")
                }
            }
        }
    }

    struct Audit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check the audit log's hash chain against the vault (--verify), or print its entries as JSON lines.",
            discussion: "Exit 31 when a line was edited, removed, reordered or added, or the log was truncated.")
        @Flag(help: "Check the chain and print a summary instead of the entries.") var verify = false
        @OptionGroup var vault: VaultOptions
        @Flag(help: "Print JSON.") var json = false

        func validate() throws { try vault.requireKey() }

        func run() async throws {
            try await reportingFailures(json: json) {
                let store = try credentialStore(vault)
                guard verify else {
                    for entry in try store.auditEntriesSync() { Console.json(.object(auditJSON(entry))) }
                    return
                }
                let report = try store.verifyAuditSync()
                if json {
                    Console.json([
                        "valid": true, "log": .string(store.auditPath), "entries": .int(report.entries), "uncommitted": .int(report.uncommitted),
                        "partial_tail": .bool(report.partialTail),
                    ])
                } else {
                    Console.out("audit log intact: \(report.entries) entries")
                }
                if report.uncommitted > 0 || report.partialTail {
                    Console.err("shadow-keys: note: the log ends with \(report.uncommitted) uncommitted line(s)\(report.partialTail ? " and a partial line" : "") from an interrupted write; they never took effect and the next write drops them")
                }
            }
        }
    }
}

/// `--client-id` and `--sub`: the user a command is about.
struct UserOptions: ParsableArguments {
    @Option(name: .customLong("client-id"), help: "The client ID (the tokens' aud) the state belongs to.") var clientID: String
    @Option(name: .customLong("sub"), help: "The user's subject (sub).") var subject: String

    func validate() throws {
        guard !clientID.isEmpty, clientID.utf8.count <= 255 else { throw ValidationError("--client-id: 1 to 255 bytes") }
        guard !subject.isEmpty, subject.utf8.count <= 255 else { throw ValidationError("--sub: 1 to 255 bytes") }
    }
}

/// The vault's credential store.
func credentialStore(_ vault: VaultOptions) throws -> VaultCredentialStore { VaultCredentialStore(vault: try vault.open()) }

/// `--at`, default now: an event time, which starts at 1970.
private func eventTime(_ value: String?) throws -> Date {
    guard let value else { return Date() }
    let time = try parseTime(value, option: "--at")
    guard time.milliseconds >= 0 else { throw ValidationError("--at: event times start at 1970-01-01T00:00:00Z") }
    return time.date
}

private func millisecondsToDate(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

private func statusJSON(_ status: CredentialStatus) -> JSONObject {
    [
        "state": .string(status.state.description), "raw_value": .int(status.state.rawValue),
        "since": status.since.map { .string(Timestamp.rfc3339($0)) } ?? .null, "cause": status.cause.map { .string($0.rawValue) } ?? .null,
        "event_id": status.eventID.map(JSONValue.string) ?? .null, "linked_sub": status.linkedSubject.map(JSONValue.string) ?? .null,
        "email_forwarding": status.emailForwarding.map(JSONValue.bool) ?? .null,
    ]
}

private func printStatus(_ status: CredentialStatus, user: UserOptions, json: Bool) {
    if json {
        var object: JSONObject = ["client_id": .string(user.clientID), "sub": .string(user.subject)]
        for member in statusJSON(status) { object.set(member.name, member.value) }
        Console.json(.object(object))
        return
    }
    Console.out("state: \(status.state) (\(status.state.rawValue))")
    if let since = status.since { Console.out("since: \(Timestamp.rfc3339(since))") }
    if let cause = status.cause { Console.out("cause: \(cause.rawValue)\(status.eventID.map { " (\($0.terminalSafe))" } ?? "")") }
    if let linked = status.linkedSubject { Console.out("linked subject: \(linked.terminalSafe)") }
    if let forwarding = status.emailForwarding { Console.out("email forwarding: \(forwarding ? "enabled" : "disabled")") }
}

private func printChanges(_ changes: [CredentialChange], json: Bool) {
    if json {
        Console.json(["applied": .array(changes.map { change in
            .object([
                "client_id": .string(change.event.clientID), "sub": .string(change.event.subject), "kind": .string(change.event.kind.rawValue),
                "event_time": .string(Timestamp.rfc3339(change.event.time)), "event_id": .string(change.event.id),
                "linked_sub": change.event.linkedSubject.map(JSONValue.string) ?? .null, "old": .string(change.old.state.description),
                "new": .string(change.new.state.description), "changed": .bool(change.changed), "state": .object(statusJSON(change.new)),
            ])
        })])
        return
    }
    for change in changes {
        let what = "\(change.event.kind.rawValue) at \(Timestamp.rfc3339(change.event.time))"
        if change.changed {
            Console.out("\(change.event.subject.terminalSafe): \(change.old.state) -> \(change.new.state) (\(what))")
        } else {
            Console.out("\(change.event.subject.terminalSafe): unchanged, \(change.new.state) (\(what): a duplicate, or older than what is recorded)")
        }
    }
}

private func auditJSON(_ entry: AuditEntry) -> JSONObject {
    [
        "seq": .int(entry.sequence), "recorded_at_ms": .int(entry.recordedAtMilliseconds), "event_time_ms": .int(entry.eventTimeMilliseconds),
        "client_id": .string(entry.clientID), "subject": .string(entry.subjectHash), "old": .string(entry.old.description),
        "new": .string(entry.new.description), "cause": .string(entry.cause.rawValue), "event_id": .string(entry.eventID),
        "linked_subject": entry.linkedSubjectHash.map(JSONValue.string) ?? .null, "email_forwarding": entry.emailForwarding.map(JSONValue.bool) ?? .null,
    ]
}
