import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowJOSE
import ShadowJWKS

struct JWKSCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jwks",
        abstract: "Fetch, inspect and clear cached JWK Sets.",
        subcommands: [Fetch.self, Show.self, Clear.self]
    )

    struct Fetch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Fetch a JWK Set now (conditionally) into the on-disk cache.",
            discussion: "Exits 0, 13 when the fetch fails, or 64 for a forbidden URL."
        )

        @Argument(help: "The https:// URL of the key set.")
        var url: String

        @Flag(name: .customLong("allow-http-loopback"), help: "Allow plain http:// to 127.0.0.1 or ::1.")
        var allowHTTPLoopback = false

        @Flag(help: "Print JSON.")
        var json = false

        func validate() throws {
            do { try URLPolicy.check(url, allowLoopbackHTTP: allowHTTPLoopback) } catch let error as HTTPTransportError {
                throw ValidationError(error.message)
            }
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let provider = try KeySourceOptions.parse(["--jwks", url] + (allowHTTPLoopback ? ["--allow-http-loopback"] : [])).provider(for: url)
                try await provider.refresh()
                try printStatus(source: url, status: try provider.status, json: json)
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a cached (URL) or local (FILE) JWK Set: kids, types, algorithms, RFC 7638 thumbprints, age and TTL.",
            discussion: "Never fetches. Exits 0, or 13 when there is nothing cached for the URL or the file is unusable."
        )

        @Argument(help: "An https:// URL (its cache) or a JWK Set file ('-' for stdin).")
        var source: String

        @Flag(help: "Print JSON.")
        var json = false

        func run() async throws {
            try await reportingFailures(json: json) {
                if KeySourceOptions.isURL(source) {
                    let provider = try KeySourceOptions.parse(["--jwks", source, "--offline", "--allow-http-loopback"]).provider(for: source)
                    let status = try provider.status
                    guard status.snapshot.lastAttempt != nil || status.keySet != nil else {
                        throw CLIError(.keysUnavailable, "nothing is cached for \(source); run `shadow-keys jwks fetch \(source)`")
                    }
                    try printStatus(source: source, status: status, json: json)
                } else {
                    let set = try readKeySet(source)
                    printKeySet(source: source, set: set, extra: [], json: json)
                }
            }
        }
    }

    struct Clear: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete cached JWK Sets: one URL's, or all of them.")

        @Argument(help: "The URL whose cache to delete; without it, every cached key set.")
        var url: String?

        func run() async throws {
            try await reportingFailures(json: false) {
                let directory = try cacheDirectory()
                if let url {
                    try FileKeySetStore(url: url, directory: directory).remove()
                    Console.out("cleared \(url)")
                    return
                }
                let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
                var removed = 0
                for name in names where name.hasSuffix(".json") || name.hasSuffix(".lock") {
                    try FileManager.default.removeItem(atPath: directory + "/" + name)
                    if name.hasSuffix(".json") { removed += 1 }
                }
                Console.out("cleared \(removed) cached key set\(removed == 1 ? "" : "s") from \(directory)")
            }
        }
    }
}

private func printStatus(source: String, status: JWKSProvider.Status, json: Bool) throws {
    guard let set = status.keySet else {
        throw CLIError(.keysUnavailable, "no usable key set for \(source)" + (status.snapshot.lastFailure.map { ": \($0)" } ?? ""))
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

private func printKeySet(source: String, set: JWKSet, extra: [JSONObject.Member], json: Bool) {
    let keys: [JSONValue] = set.keys.map { key in
        var object: JSONObject = ["kid": key.keyID.map(JSONValue.string) ?? .null, "kty": .string(key.json["kty"]?.stringValue ?? "")]
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
        Console.out("  \(key.keyID?.terminalSafe ?? "(no kid)")  \(key.keyType)  alg \(alg)  use \((key.use ?? "-").terminalSafe)  thumbprint \(key.thumbprint)")
    }
    for diagnostic in set.skipped { Console.out("  skipped \(diagnostic.description.terminalSafe)") }
}
