public import Synchronization

/// A dictionary shared between threads that holds at most `capacity` entries: when it is full, an
/// arbitrary entry makes room for the next. For results that are costly to recompute and safe to
/// forget (checked proof headers, verified tokens). Public and inlinable only so that each user's
/// key and value types are specialized (a `package` body is not serialized for other modules):
/// a request's lookups and inserts do not go through generic metadata.
public final class BoundedCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline let entries = Mutex<[Key: Value]>([:])
    @usableFromInline let capacity: Int

    @inlinable
    public init(capacity: Int) {
        precondition(capacity > 0, "a cache holds at least one entry")
        self.capacity = capacity
    }

    @inlinable
    public subscript(_ key: Key) -> Value? { entries.withLock { $0[key] } }

    @inlinable
    public func insert(_ key: Key, _ value: Value) {
        entries.withLock { entries in
            if entries.count >= capacity, entries[key] == nil { entries.remove(at: entries.startIndex) }
            entries[key] = value
        }
    }

    @inlinable
    public func remove(_ key: Key) { _ = entries.withLock { $0.removeValue(forKey: key) } }

    @inlinable
    public var count: Int { entries.withLock { $0.count } }
}
