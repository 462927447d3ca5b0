#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowCrypto
import ShadowVault

/// TestVectors/shadow/vault/vectors.json (made by an independent implementation of
/// Docs/vault-format.md): every positive vector opens to its contents and re-seals byte for
/// byte; every negative vector fails with the stated error.
package enum VaultSuites {
    package static func vectors(_ bytes: [UInt8]) -> [VectorCase] {
        VectorCase.positivesAndNegatives(bytes, positive: positive, negative: negative)
    }

    private static func unlock(_ object: JSONObject?) throws -> VaultUnlock {
        guard let object, let kind = object["kind"]?.stringValue else { throw VectorFormatError("no unlock") }
        if kind == "key" { return .key(SecretBytes(try Hex.decode(object["key_hex"]?.stringValue ?? ""))) }
        return .passphrase(SecretBytes(utf8: object["passphrase"]?.stringValue ?? ""))
    }

    /// The vector's `contents` as vault contents, and its entries as built from the JSON (in byte
    /// order of their names), which never went through the reader.
    private static func contents(_ object: JSONObject?) throws -> (VaultContents, [VaultEntry]) {
        guard let object, let generation = object["generation"]?.numberValue?.int64Value else {
            throw VectorFormatError("no contents")
        }
        func date(_ value: JSONValue?) -> Date? {
            value?.numberValue?.int64Value.map { Date(timeIntervalSince1970: Double($0) / 1000) }
        }
        var contents = VaultContents(generation: UInt64(generation))
        var entries: [VaultEntry] = []
        for value in object["entries"]?.arrayValue ?? [] {
            guard let entry = value.objectValue, let name = entry["name"]?.stringValue,
                let provider = entry["provider"]?.stringValue.flatMap(VaultEntry.Provider.init(rawValue:)),
                let kind = entry["kind"]?.stringValue.flatMap(VaultEntry.Kind.init(rawValue:)),
                let created = date(entry["created_at_ms"]),
                let updated = date(entry["updated_at_ms"])
            else { throw VectorFormatError("malformed entry") }
            var labels = VaultLabels()
            for member in entry["labels"]?.objectValue ?? [:] { labels[member.name] = member.value.stringValue }
            entries.append(
                VaultEntry(
                    name: name, secret: SecretBytes(try Hex.decode(entry["secret_hex"]?.stringValue ?? "")),
                    provider: provider, kind: kind,
                    subject: entry["subject"]?.stringValue, createdAt: created, updatedAt: updated,
                    expiresAt: date(entry["expires_at_ms"]), labels: labels))
            contents.insert(entries[entries.count - 1])
        }
        for member in object["sections"]?.objectValue ?? [:] { try contents.setSection(member.name, member.value) }
        entries.sort { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }
        return (contents, entries)
    }

    /// Whether opened contents hold the expected generation and sections, and exactly the
    /// expected entries, metadata and secrets, every name compared by its bytes.
    private static func same(_ a: VaultContents, _ b: VaultContents, entries: [VaultEntry]) throws -> Bool {
        func secret(_ entry: VaultEntry) -> [UInt8] { entry.secret.withUnsafeBytes { Array($0) } }
        func sameNames(_ x: [String], _ y: [String]) -> Bool {
            x.count == y.count && zip(x, y).allSatisfy { $0.exactlyEquals($1) }
        }
        guard a.generation == b.generation, sameNames(a.sectionNames, b.sectionNames), a.count == entries.count
        else { return false }
        for name in a.sectionNames where try a.section(name) != b.section(name) { return false }
        return zip(a.entries, entries).allSatisfy { x, y in
            x.name.exactlyEquals(y.name) && secret(x) == secret(y) && x.provider == y.provider && x.kind == y.kind
                && (x.subject.map { y.subject?.exactlyEquals($0) ?? false } ?? (y.subject == nil))
                && x.createdAt == y.createdAt && x.updatedAt == y.updatedAt && x.expiresAt == y.expiresAt
                && x.labels == y.labels
        }
    }

    private static func positive(_ vector: JSONObject) -> VectorCase {
        let name = vector["name"]?.stringValue ?? "?"
        do {
            let unlock = try unlock(vector["unlock"]?.objectValue)
            let file = try Hex.decode(vector["fileHex"]?.stringValue ?? "")
            let (expected, entries) = try contents(vector["contents"]?.objectValue)
            let random = vector["randomness"]?.objectValue
            func field(_ key: String) throws -> [UInt8] { try Hex.decode(random?[key]?.stringValue ?? "") }
            let randomness = VaultRandomness(
                vaultID: try field("vault_id"), salt: try field("salt"), nonce: try field("nonce"))
            let iterations = Int(vector["iterations"]?.numberValue?.int64Value ?? Int64(PBKDF2.defaultIterations))
            let opened = try TokenVault.open(file, unlock: unlock)
            let resealed = try TokenVault.seal(expected, unlock: unlock, iterations: iterations, randomness: randomness)
            let matches = try same(opened, expected, entries: entries)
            return VectorCase(
                id: name, passed: matches && resealed == file,
                detail: "\(name): opens to the contents \(matches), re-seals byte for byte \(resealed == file)")
        } catch {
            return VectorCase(id: name, passed: false, detail: "\(name): \(error)")
        }
    }

    private static func negative(_ vector: JSONObject) -> VectorCase {
        let name = vector["name"]?.stringValue ?? "?"
        let expected = vector["expect"]?.stringValue ?? "?"
        do {
            let unlock = try unlock(vector["unlock"]?.objectValue)
            let file = try Hex.decode(vector["fileHex"]?.stringValue ?? "")
            let outcome: String
            do {
                _ = try TokenVault.open(file, unlock: unlock)
                outcome = "ok"
            } catch let error as VaultError {
                outcome = error.code.name
            }
            return VectorCase(
                id: name, passed: outcome == expected, detail: "\(name): expected \(expected), got \(outcome)")
        } catch {
            return VectorCase(id: name, passed: false, detail: "\(name): \(error)")
        }
    }
}
