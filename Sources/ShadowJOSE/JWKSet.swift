public import ShadowCore

/// A JWK Set (RFC 7517 §5): the usable verification keys, and a diagnostic for every entry
/// that was skipped.
///
/// Keys of an unsupported type, curve or algorithm, or that fail their checks, are skipped and
/// reported; they do not fail the set. Duplicate `kid`s do.
public struct JWKSet: Sendable {
    /// Why an entry of the set was not taken as a key.
    public struct Diagnostic: Sendable, Hashable, CustomStringConvertible {
        /// Position of the entry in `keys`.
        public let index: Int
        /// The entry's `kid`, when it has a string one.
        public let keyID: String?
        /// What was wrong.
        public let reason: String

        public var description: String {
            "keys[\(index)]" + (keyID.map { " (kid \($0.quotedForMessage))" } ?? "") + ": \(reason)"
        }
    }

    /// The usable keys, in document order.
    public let keys: [JWK]
    /// The entries that were skipped, in document order.
    public let skipped: [Diagnostic]
    private let indexByKeyID: [ExactName: Int]
    private let skippedKeyIDs: [ExactName: String]

    /// Largest key-set document read, in bytes.
    public static let maxDocumentBytes = 1024 * 1024

    /// A set made of `keys`.
    /// - Throws: ``JOSEError/Code/invalidKeySet`` when two keys share a `kid`.
    public init(keys: [JWK]) throws {
        try self.init(keys: keys, skipped: [])
    }

    private init(keys: [JWK], skipped: [Diagnostic]) throws {
        var index: [ExactName: Int] = [:]
        for (position, key) in keys.enumerated() {
            guard let kid = key.keyID else { continue }
            if index.updateValue(position, forKey: ExactName(kid)) != nil {
                throw JOSEError(.invalidKeySet, "key set has more than one key with kid \(kid.quotedForMessage)")
            }
        }
        var skippedIDs: [ExactName: String] = [:]
        for diagnostic in skipped {
            guard let kid = diagnostic.keyID else { continue }
            if index[ExactName(kid)] != nil || skippedIDs.updateValue(diagnostic.reason, forKey: ExactName(kid)) != nil
            {
                throw JOSEError(.invalidKeySet, "key set has more than one key with kid \(kid.quotedForMessage)")
            }
        }
        self.keys = keys
        self.skipped = skipped
        self.indexByKeyID = index
        self.skippedKeyIDs = skippedIDs
    }

    /// Reads a JWK Set document: a JSON object with a `keys` array.
    public init(json bytes: some Collection<UInt8>) throws {
        let value: JSONValue
        do {
            value = try StrictJSON.parse(bytes, limits: .init(maxBytes: Self.maxDocumentBytes, maxDepth: 32))
        } catch {
            throw JOSEError(.invalidKeySet, "key set is not valid JSON: \(error)")
        }
        guard let object = value.objectValue else {
            throw JOSEError(.invalidKeySet, "key set must be a JSON object, found \(value.typeName)")
        }
        guard let entries = object["keys"]?.arrayValue else {
            throw JOSEError(.invalidKeySet, "key set has no \"keys\" array")
        }
        var keys: [JWK] = []
        var skipped: [Diagnostic] = []
        for (index, entry) in entries.enumerated() {
            guard let member = entry.objectValue else {
                skipped.append(
                    Diagnostic(index: index, keyID: nil, reason: "entry is a \(entry.typeName), not an object"))
                continue
            }
            do {
                keys.append(try JWK(json: member))
            } catch let error as JOSEError {
                skipped.append(Diagnostic(index: index, keyID: member["kid"]?.stringValue, reason: error.reason))
            }
        }
        try self.init(keys: keys, skipped: skipped)
    }

    /// Reads a JWK Set from JSON text.
    public init(jsonText: String) throws {
        try self.init(json: Array(jsonText.utf8))
    }

    /// The key that verifies a token with this `kid` and algorithm.
    ///
    /// With a `kid`, only the key with exactly that `kid` is considered; there is no fallback.
    /// Without one, the set must hold exactly one key able to verify `algorithm`.
    ///
    /// - Throws: ``JOSEError/Code/unknownKey`` or ``JOSEError/Code/algorithmKeyMismatch``.
    public func key(for keyID: String?, algorithm: JWSAlgorithm) throws -> JWK {
        if let keyID {
            let name = ExactName(keyID)
            guard let index = indexByKeyID[name] else {
                if let reason = skippedKeyIDs[name] {
                    throw JOSEError(
                        .unknownKey, "kid \(keyID.quotedForMessage) names a key set entry that was skipped: \(reason)")
                }
                throw JOSEError(.unknownKey, "no key with kid \(keyID.quotedForMessage) in the key set (\(keySummary))")
            }
            let key = keys[index]
            if let refusal = key.refusal(for: algorithm) { throw JOSEError(.algorithmKeyMismatch, refusal) }
            return key
        }
        var found: JWK?
        var count = 0
        for key in keys where key.canVerify(algorithm) {
            found = key
            count += 1
        }
        guard count == 1, let found else {
            throw JOSEError(
                .unknownKey,
                """
                token has no kid and the key set has \(count) keys able to verify \(algorithm); exactly one is \
                required
                """
            )
        }
        return found
    }

    /// True when a key with this `kid` is in the set (usable or not).
    public func contains(keyID: String) -> Bool {
        indexByKeyID[ExactName(keyID)] != nil
    }

    private var keySummary: String {
        let kids = keys.compactMap(\.keyID)
        if kids.isEmpty { return "\(keys.count) keys, none with a kid" }
        let shown = kids.prefix(8).map(\.quotedForMessage).joined(separator: ", ")
        return "kids: \(shown)" + (kids.count > 8 ? ", … (\(kids.count) in all)" : "")
    }

    /// The usable keys as a JWK Set document.
    public var json: JSONObject {
        ["keys": .array(keys.map { .object($0.json) })]
    }
}
