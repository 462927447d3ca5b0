#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowCrypto

/// The decrypted body: compact JSON with members in a fixed order (Docs/vault-format.md),
/// entries sorted by the UTF-8 bytes of their names. Readers accept any member order.
enum VaultBody {
    static let format = "shadow-keys-vault"

    static func encode(_ contents: VaultContents) -> [UInt8] {
        func ms(_ date: Date?) -> JSONValue { date.map { .int(Int64(($0.timeIntervalSince1970 * 1000).rounded())) } ?? .null }
        let entries: [JSONValue] = contents.entries.values.sorted { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }.map { entry in
            var labels = JSONObject()
            for key in entry.labels.keys.sorted(by: { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }) { labels.set(key, .string(entry.labels[key] ?? "")) }
            return [
                "createdAtMs": ms(entry.createdAt), "expiresAtMs": ms(entry.expiresAt), "kind": .string(entry.kind.rawValue), "labels": .object(labels),
                "name": .string(entry.name), "provider": .string(entry.provider.rawValue),
                "secret": .string(entry.secret.withUnsafeBytes { Base64URL.encode($0) }), "subject": entry.subject.map(JSONValue.string) ?? .null,
                "updatedAtMs": ms(entry.updatedAt),
            ]
        }
        var sections = JSONObject()
        for member in contents.sections.sorted(by: { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }) { sections.set(member.name, member.value) }
        let body: JSONValue = ["entries": .array(entries), "format": .string(format), "generation": .int(Int64(contents.generation)), "sections": .object(sections)]
        return Array(body.serialized().utf8)
    }

    static func decode(_ bytes: [UInt8]) throws -> VaultContents {
        func corrupt(_ why: String) -> VaultError { VaultError(.corrupted, "the vault body is malformed: \(why)") }
        guard let object = (try? StrictJSON.parse(bytes, limits: .init(maxBytes: TokenVault.maxFileBytes, maxDepth: 64)))?.objectValue else {
            throw corrupt("not a JSON object")
        }
        guard object["format"]?.stringValue == format else { throw corrupt("unknown format") }
        guard let generation = object["generation"]?.numberValue?.int64Value, generation >= 0 else { throw corrupt("no generation") }
        guard let entries = object["entries"]?.arrayValue, let sections = object["sections"]?.objectValue else { throw corrupt("no entries or sections") }
        var contents = VaultContents(generation: UInt64(generation), sections: sections)
        func date(_ value: JSONValue?) throws -> Date? {
            switch value {
            case .null?: return nil
            case .number(let number)?:
                guard let ms = number.int64Value else { throw corrupt("a time is not an integer") }
                return Date(timeIntervalSince1970: Double(ms) / 1000)
            default: throw corrupt("a time is missing or not a number")
            }
        }
        for value in entries {
            guard let entry = value.objectValue, let name = entry["name"]?.stringValue, let secret = entry["secret"]?.stringValue,
                let provider = entry["provider"]?.stringValue.flatMap(VaultEntry.Provider.init(rawValue:)),
                let kind = entry["kind"]?.stringValue.flatMap(VaultEntry.Kind.init(rawValue:)),
                let created = try date(entry["createdAtMs"]), let updated = try date(entry["updatedAtMs"]), let labelObject = entry["labels"]?.objectValue
            else { throw corrupt("an entry is incomplete") }
            let subject: String?
            switch entry["subject"] {
            case .string(let value)?: subject = value
            case .null?: subject = nil
            default: throw corrupt("an entry's subject is missing or not a string")
            }
            var labels: [String: String] = [:]
            for member in labelObject {
                guard let text = member.value.stringValue else { throw corrupt("a label is not a string") }
                labels[member.name] = text
            }
            guard let secretBytes = try? Base64URL.decode(secret) else { throw corrupt("a secret is not base64url") }
            guard contents.entries[name] == nil else { throw corrupt("two entries are named \(name.quotedForMessage)") }
            contents.entries[name] = VaultEntry(
                name: name, secret: SecretBytes(secretBytes), provider: provider, kind: kind, subject: subject, createdAt: created,
                updatedAt: updated, expiresAt: try date(entry["expiresAtMs"]), labels: labels)
        }
        return contents
    }
}
