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

/// `--client-id` and `--sub`: the user a command is about.
struct UserOptions: ParsableArguments {
    @Option(name: .customLong("client-id"), help: "The client ID (the tokens' aud) the state belongs to.") var clientID:
        String
    @Option(name: .customLong("sub"), help: "The user's subject (sub).") var subject: String

    func validate() throws {
        guard !clientID.isEmpty, clientID.utf8.count <= 255 else {
            throw ValidationError("--client-id: 1 to 255 bytes")
        }
        guard !subject.isEmpty, subject.utf8.count <= 255 else { throw ValidationError("--sub: 1 to 255 bytes") }
    }
}

/// What every per-user query takes: the user, the store that holds the state, and `--json`.
struct UserQueryOptions: ParsableArguments {
    @OptionGroup var user: UserOptions
    @OptionGroup var store: StoreOptions
    @Flag(help: "Print JSON.") var json = false

    func validate() throws { try store.requireKey() }

    /// The user's record.
    func record() async throws -> CredentialRecord {
        try await store.withStore(create: false) { try await $0.record(clientID: user.clientID, subject: user.subject) }
    }
}

/// `--at`, default now: an event time, which starts at 1970.
func eventTime(_ value: String?) throws -> Date {
    guard let value else { return Date() }
    let time = try parseTime(value, option: "--at")
    guard time.milliseconds >= 0 else { throw ValidationError("--at: event times start at 1970-01-01T00:00:00Z") }
    return time.date
}

func millisecondsToDate(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

func statusJSON(_ status: CredentialStatus) -> JSONObject {
    [
        "state": .string(status.state.description), "raw_value": .int(status.state.rawValue),
        "since": status.since.map { .string(Timestamp.rfc3339Exact($0)) } ?? .null,
        "cause": status.cause.map { .string($0.rawValue) } ?? .null,
        "event_id": status.eventID.map(JSONValue.string) ?? .null,
        "linked_sub": status.linkedSubject.map(JSONValue.string) ?? .null,
        "email_forwarding": status.emailForwarding.map(JSONValue.bool) ?? .null,
    ]
}

func printStatus(_ status: CredentialStatus, user: UserOptions, json: Bool) {
    if json {
        var object: JSONObject = ["client_id": .string(user.clientID), "sub": .string(user.subject)]
        for member in statusJSON(status) { object.set(member.name, member.value) }
        Console.json(.object(object))
        return
    }
    Console.out("state: \(status.state) (\(status.state.rawValue))")
    if let since = status.since { Console.out("since: \(Timestamp.rfc3339Exact(since))") }
    if let cause = status.cause {
        Console.out("cause: \(cause.rawValue)\(status.eventID.map { " (\($0.terminalSafe))" } ?? "")")
    }
    if let linked = status.linkedSubject { Console.out("linked subject: \(linked.terminalSafe)") }
    if let forwarding = status.emailForwarding {
        Console.out("email forwarding: \(forwarding ? "enabled" : "disabled")")
    }
}

func printChanges(_ changes: [CredentialChange], json: Bool) {
    if json {
        Console.json([
            "applied": .array(
                changes.map { change in
                    .object([
                        "client_id": .string(change.event.clientID), "sub": .string(change.event.subject),
                        "kind": .string(change.event.kind.rawValue),
                        "event_time": .string(Timestamp.rfc3339Exact(change.event.time)),
                        "event_id": .string(change.event.id),
                        "linked_sub": change.event.linkedSubject.map(JSONValue.string) ?? .null,
                        "old": .string(change.old.state.description),
                        "new": .string(change.new.state.description), "changed": .bool(change.changed),
                        "state": .object(statusJSON(change.new)),
                    ])
                })
        ])
        return
    }
    for change in changes {
        let what = "\(change.event.kind.rawValue) at \(Timestamp.rfc3339Exact(change.event.time))"
        if change.changed {
            Console.out("\(change.event.subject.terminalSafe): \(change.old.state) -> \(change.new.state) (\(what))")
        } else {
            Console.out(
                """
                \(change.event.subject.terminalSafe): unchanged, \(change.new.state) (\(what): a duplicate, or older \
                than what is recorded)
                """
            )
        }
    }
}

func auditJSON(_ entry: AuditEntry) -> JSONObject {
    [
        "seq": .int(entry.sequence), "recorded_at_ms": .int(entry.recordedAtMilliseconds),
        "event_time_ms": .int(entry.eventTimeMilliseconds),
        "client_id": .string(entry.clientID), "subject": .string(entry.subjectHash),
        "old": .string(entry.old.description),
        "new": .string(entry.new.description), "cause": .string(entry.cause.rawValue),
        "event_id": .string(entry.eventID),
        "linked_subject": entry.linkedSubjectHash.map(JSONValue.string) ?? .null,
        "email_forwarding": entry.emailForwarding.map(JSONValue.bool) ?? .null,
    ]
}
