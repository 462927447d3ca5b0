public import Synchronization

/// A dictionary shared between threads that holds at most `capacity` entries: when it is full,
/// the oldest key inserted makes room for the next. For results that are costly to recompute and
/// safe to forget (checked proof headers, verified tokens). Public and inlinable only so that
/// each user's key and value types are specialized (a `package` body is not serialized for other
/// modules): a request's lookups and inserts do not go through generic metadata.
///
/// The keys leave in the order they came, not from the table's first bucket: a dictionary probes
/// linearly, and always taking its first occupied bucket leaves the empty buckets at the front
/// and packs the rest, so that a miss in a full cache walked hundreds of keys.
public final class BoundedCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline let storage: Mutex<Storage>
    @usableFromInline let capacity: Int

    /// The table, and a ring of `capacity` slots holding each key of the table (a key removed
    /// and inserted again can hold two: when the older comes round, it takes the key early).
    @usableFromInline struct Storage: Sendable {
        @usableFromInline var table: [Key: Value] = [:]
        @usableFromInline var ring: [Key?]
        @usableFromInline var next = 0

        @usableFromInline init(capacity: Int) { ring = Array(repeating: nil, count: capacity) }
    }

    @inlinable
    public init(capacity: Int) {
        precondition(capacity > 0, "a cache holds at least one entry")
        self.capacity = capacity
        storage = Mutex(Storage(capacity: capacity))
    }

    @inlinable
    public subscript(_ key: Key) -> Value? { storage.withLock { $0.table[key] } }

    @inlinable
    public func insert(_ key: Key, _ value: Value) {
        storage.withLock { storage in
            if storage.table.updateValue(value, forKey: key) != nil { return }
            // A new key takes the next slot, and the key that held it leaves.
            if let old = storage.ring[storage.next], old != key { storage.table.removeValue(forKey: old) }
            storage.ring[storage.next] = key
            storage.next = storage.next + 1 == capacity ? 0 : storage.next + 1
        }
    }

    @inlinable
    public func remove(_ key: Key) { _ = storage.withLock { $0.table.removeValue(forKey: key) } }

    @inlinable
    public var count: Int { storage.withLock { $0.table.count } }
}
