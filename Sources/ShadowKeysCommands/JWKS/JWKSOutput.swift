import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowJOSE
import ShadowJWKS

func printStatus(source: String, status: JWKSProvider.Status, json: Bool) throws {
    guard let set = status.keySet else {
        throw CLIError(
            .keysUnavailable, "no usable key set for \(source)" + (status.snapshot.lastFailure.map { ": \($0)" } ?? ""))
    }
    let now = Date()
    let snapshot = status.snapshot
    func time(_ date: Date?) -> JSONValue { date.map { .string(Timestamp.rfc3339($0)) } ?? .null }
    var extra: [JSONObject.Member] = [
        .init(name: "fetchedAt", value: time(snapshot.fetchedAt)),
        .init(name: "ageSeconds", value: snapshot.fetchedAt.map { .int(Int(now.timeIntervalSince($0))) } ?? .null),
        .init(name: "expiresAt", value: time(snapshot.expiresAt)),
        .init(name: "ttlSeconds", value: snapshot.expiresAt.map { .int(Int($0.timeIntervalSince(now))) } ?? .null),
        .init(name: "etag", value: snapshot.etag.map(JSONValue.string) ?? .null),
        .init(name: "lastFailure", value: snapshot.lastFailure.map(JSONValue.string) ?? .null),
        .init(name: "unknownKids", value: .int(snapshot.unknownKeyIDs.count)),
    ]
    if snapshot.expiresAt.map({ $0 <= now }) == true { extra.append(.init(name: "stale", value: true)) }
    printKeySet(source: source, set: set, extra: extra, json: json)
}

func printKeySet(source: String, set: JWKSet, extra: [JSONObject.Member], json: Bool) {
    let keys: [JSONValue] = set.keys.map { key in
        var object: JSONObject = [
            "kid": key.keyID.map(JSONValue.string) ?? .null, "kty": .string(key.json["kty"]?.stringValue ?? ""),
        ]
        switch key.keyType {
        case .rsa(let bits): object.set("bits", .int(bits))
        case .p256: object.set("crv", "P-256")
        }
        object.set("alg", key.algorithm.map { .string($0.rawValue) } ?? .null)
        object.set("use", key.use.map(JSONValue.string) ?? .null)
        object.set("thumbprint", .string(key.thumbprint))
        return .object(object)
    }
    let skipped: [JSONValue] = set.skipped.map {
        ["index": .int($0.index), "kid": $0.keyID.map(JSONValue.string) ?? .null, "reason": .string($0.reason)]
    }
    if json {
        var object: JSONObject = ["source": .string(source)]
        for member in extra { object.set(member.name, member.value) }
        object.set("keys", .array(keys))
        object.set("skipped", .array(skipped))
        Console.json(.object(object))
        return
    }
    // Everything below but the counts and key types came from the key set's author or server.
    Console.out("source: \(source.terminalSafe)")
    for member in extra where member.value != .null {
        let value = member.value.stringValue ?? member.value.serialized()
        Console.out("\(member.name): \(value.terminalSafe)")
    }
    Console.out("\(set.keys.count) usable key\(set.keys.count == 1 ? "" : "s"):")
    for key in set.keys {
        let alg = key.algorithm?.rawValue ?? "-"
        let kid = key.keyID?.terminalSafe ?? "(no kid)", use = (key.use ?? "-").terminalSafe
        Console.out("  \(kid)  \(key.keyType)  alg \(alg)  use \(use)  thumbprint \(key.thumbprint)")
    }
    for diagnostic in set.skipped { Console.out("  skipped \(diagnostic.description.terminalSafe)") }
}
