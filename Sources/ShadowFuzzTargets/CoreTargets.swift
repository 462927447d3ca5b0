import ShadowCore

enum CoreTargets {
    /// The strict reader; what it accepts serializes (plainly and for a terminal) and parses
    /// back to the same value.
    static let json: FuzzTargets.Harness = { data in
        guard let value = try? StrictJSON.parse(buffer: data.bindMemory(to: UInt8.self), limits: .document) else { return }
        for text in [value.serialized(), value.serialized(pretty: true), value.serializedForTerminal()] {
            guard let again = try? StrictJSON.parse(text, limits: .document) else { preconditionFailure("serialized JSON does not parse: \(text.prefix(200))") }
            precondition(again == value, "JSON changed in a round trip: \(text.prefix(200))")
        }
    }

    /// Canonical base64url: whatever decodes re-encodes to exactly the input.
    static let base64URL: FuzzTargets.Harness = { data in
        let input = data.bindMemory(to: UInt8.self)
        guard let decoded = try? Base64URL.decode(input) else { return }
        precondition(Base64URL.encode(decoded).utf8.elementsEqual(input), "base64url is not canonical")
        precondition(Base64URL.decodedCount(input.count) == decoded.count)
    }

    /// Times: every accepted one is in range, and its RFC 3339 form parses to it (whole seconds).
    static let time: FuzzTargets.Harness = { data in
        let text = String(decoding: data, as: UTF8.self)
        guard let time = try? Timestamp.parse(text) else { return }
        precondition(Timestamp.range.contains(time.milliseconds))
        let whole = Timestamp(wholeSeconds: time.wholeSeconds)
        precondition(whole != nil && (try? Timestamp.parse(time.rfc3339)) == whole, "RFC 3339 round trip failed for \(text.prefix(80))")
        _ = time.fields
        _ = time.date
    }
}
