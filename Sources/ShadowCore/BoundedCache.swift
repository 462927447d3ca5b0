import Synchronization

/// A dictionary shared between threads that holds at most `capacity` entries: when it is full, an
/// arbitrary entry makes room for the next. For results that are costly to recompute and safe to
/// forget (checked proof headers, verified tokens).
package final class BoundedCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private let entries = Mutex<[Key: Value]>([:])
    let capacity: Int

    package init(capacity: Int) {
        precondition(capacity > 0, "a cache holds at least one entry")
        self.capacity = capacity
    }

    package subscript(_ key: Key) -> Value? { entries.withLock { $0[key] } }

    package func insert(_ key: Key, _ value: Value) {
        entries.withLock { entries in
            if entries.count >= capacity, entries[key] == nil { entries.remove(at: entries.startIndex) }
            entries[key] = value
        }
    }

    package func remove(_ key: Key) { _ = entries.withLock { $0.removeValue(forKey: key) } }

    package var count: Int { entries.withLock { $0.count } }
}
