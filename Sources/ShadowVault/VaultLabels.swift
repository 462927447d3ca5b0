/// An entry's free labels (Docs/vault-format.md, "Body"): keys compared byte for byte, as entry
/// names are, and kept in the byte order of their keys, the order the file stores them in.
///
/// A `[String: String]` cannot hold them: Swift compares strings by canonical equivalence, so
/// the precomposed and decomposed spellings of "é", two keys to the format and to every other
/// reader, would be one key, and a vault read and written again would lose one of the labels.
public struct VaultLabels: Sendable, Hashable, RandomAccessCollection, ExpressibleByDictionaryLiteral {
    public typealias Element = (key: String, value: String)

    private var keysAndValues: [Element] = []

    public init() {}

    /// The labels of a dictionary literal; a key given twice (byte for byte) is a programming
    /// error, as it is in a `Dictionary` literal.
    public init(dictionaryLiteral elements: (String, String)...) {
        for (key, value) in elements {
            precondition(updateValue(value, forKey: key) == nil, "a label key is given twice")
        }
    }

    /// The labels of a dictionary.
    public init(_ dictionary: [String: String]) {
        for (key, value) in dictionary { self[key] = value }
    }

    public var startIndex: Int { keysAndValues.startIndex }
    public var endIndex: Int { keysAndValues.endIndex }
    public subscript(position: Int) -> Element { keysAndValues[position] }

    /// The keys, in byte order.
    public var keys: [String] { keysAndValues.map(\.key) }

    /// The value of the key spelled exactly `key`; setting `nil` removes it.
    public subscript(key: String) -> String? {
        get {
            let (index, found) = position(of: key)
            return found ? keysAndValues[index].value : nil
        }
        set {
            if let newValue { updateValue(newValue, forKey: key) } else { removeValue(forKey: key) }
        }
    }

    /// Sets the value of `key`; returns the value it replaced, if any.
    @discardableResult
    public mutating func updateValue(_ value: String, forKey key: String) -> String? {
        let (index, found) = position(of: key)
        guard found else {
            keysAndValues.insert((key, value), at: index)
            return nil
        }
        defer { keysAndValues[index].value = value }
        return keysAndValues[index].value
    }

    /// Removes `key`; returns its value, if it had one.
    @discardableResult
    public mutating func removeValue(forKey key: String) -> String? {
        let (index, found) = position(of: key)
        return found ? keysAndValues.remove(at: index).value : nil
    }

    /// Binary search by key bytes: the index of `key`, or where it would go.
    private func position(of key: String) -> (index: Int, found: Bool) {
        var key = key
        return key.withUTF8 { target in
            var low = 0
            var high = keysAndValues.count
            while low < high {
                let middle = (low + high) / 2
                var probe = keysAndValues[middle].key
                let order = probe.withUTF8 { EntryCodec.compare($0, target) }
                if order == 0 { return (middle, true) }
                if order < 0 { low = middle + 1 } else { high = middle }
            }
            return (low, false)
        }
    }

    public static func == (lhs: VaultLabels, rhs: VaultLabels) -> Bool {
        lhs.keysAndValues.count == rhs.keysAndValues.count
            && zip(lhs.keysAndValues, rhs.keysAndValues).allSatisfy {
                $0.key.utf8.elementsEqual($1.key.utf8) && $0.value.utf8.elementsEqual($1.value.utf8)
            }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(keysAndValues.count)
        for (key, value) in keysAndValues {
            hasher.combine(key.utf8.count)
            for byte in key.utf8 { hasher.combine(byte) }
            hasher.combine(value.utf8.count)
            for byte in value.utf8 { hasher.combine(byte) }
        }
    }
}
