import ShadowCore

extension CredentialEvent {
    /// The members of one event line, and nothing else.
    static let lineMembers: Set<String> = ["kind", "client_id", "sub", "time_ms", "id", "linked_sub"]

    /// Reads a JSON-lines backlog of events (Docs/cli.md, `state apply-events`): one object a line,
    /// `{"kind","client_id","sub","time_ms","id","linked_sub"}` with `linked_sub` optional; blank
    /// lines skipped; a line may end in CR LF.
    /// - Throws: ``CredentialError/Code/invalidEvent`` naming the first bad line.
    public static func parseLines(_ bytes: [UInt8]) throws -> [CredentialEvent] {
        var events: [CredentialEvent] = []
        var number = 0
        for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            number += 1
            let text = line.last == 0x0D ? line.dropLast() : line
            if text.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            func bad(_ reason: String) -> CredentialError {
                CredentialError(.invalidEvent, "line \(number): \(reason)")
            }
            let value: JSONValue
            do { value = try StrictJSON.parse(text, limits: .init(maxBytes: 4096, maxDepth: 2)) } catch {
                throw bad("not a JSON object (\(error))")
            }
            guard let object = value.objectValue else { throw bad("not a JSON object") }
            for member in object where !lineMembers.contains(member.name) {
                throw bad("unknown member \(member.name.quotedForMessage)")
            }
            guard let kindName = object["kind"]?.stringValue else { throw bad("\"kind\" is missing or not a string") }
            guard let kind = Kind(rawValue: kindName) else {
                throw bad(
                    """
                    unknown kind \(kindName.quotedForMessage) (one of \
                    \(Kind.allCases.map(\.rawValue).joined(separator: ", ")))
                    """
                )
            }
            guard let clientID = object["client_id"]?.stringValue else {
                throw bad("\"client_id\" is missing or not a string")
            }
            guard let subject = object["sub"]?.stringValue else { throw bad("\"sub\" is missing or not a string") }
            guard let time = object["time_ms"]?.numberValue?.int64Value else {
                throw bad("\"time_ms\" is missing or not an integer")
            }
            guard let id = object["id"]?.stringValue else { throw bad("\"id\" is missing or not a string") }
            let linked = object["linked_sub"] ?? .null
            guard linked == .null || linked.stringValue != nil else {
                throw bad("\"linked_sub\" is neither a string nor null")
            }
            do {
                events.append(
                    try CredentialEvent(
                        kind: kind, clientID: clientID, subject: subject, timeMilliseconds: time, id: id,
                        linkedSubject: linked.stringValue))
            } catch let error as CredentialError {
                throw bad(error.reason)
            }
        }
        return events
    }

    /// The event as one line of ``parseLines(_:)``.
    public var line: String {
        JSONValue.object([
            "kind": .string(kind.rawValue), "client_id": .string(clientID), "sub": .string(subject),
            "time_ms": .int(timeMilliseconds), "id": .string(id),
            "linked_sub": linkedSubject.map(JSONValue.string) ?? .null,
        ]).serialized()
    }
}
