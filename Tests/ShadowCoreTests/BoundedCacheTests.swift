import ShadowCore
import Synchronization
import Testing

@Suite struct BoundedCacheTests {
    @Test func itHoldsAtMostItsCapacityAndKeepsTheNewest() {
        let cache = BoundedCache<Int, String>(capacity: 3)
        for key in 0..<10 {
            cache.insert(key, "v\(key)")
            #expect(cache.count == min(key + 1, 3))
            #expect(cache[key] == "v\(key)", "the newest entry is kept")
        }
        // Replacing an entry that is there makes no room.
        let kept = (0..<10).filter { cache[$0] != nil }
        #expect(kept == [7, 8, 9], "the oldest keys left first")
        cache.insert(kept[0], "again")
        #expect(cache.count == 3 && cache[kept[0]] == "again")
        #expect((0..<10).filter { cache[$0] != nil } == kept)
        cache.remove(kept[1])
        #expect(cache[kept[1]] == nil && cache.count == 2)
    }

    /// A key removed and inserted again holds two slots of the ring: the count never passes the
    /// capacity, and the key just inserted is there.
    @Test func keysRemovedAndInsertedAgainNeverOverfillIt() {
        let cache = BoundedCache<Int, Int>(capacity: 4)
        for step in 0..<200 {
            let key = step % 7
            if step % 3 == 0 { cache.remove((step / 3) % 7) }
            cache.insert(key, step)
            #expect(cache.count <= 4)
            #expect(cache[key] == step)
        }
    }

    /// Comparisons per lookup in a full cache after long churn: a miss compares few keys (the
    /// table's probe runs stay short), where evicting from the first bucket packed them.
    @Test func aMissInAFullCacheAfterChurnComparesFewKeys() {
        let counter = Comparisons()
        let cache = BoundedCache<CountedKey, Int>(capacity: 4096)
        for number in 0..<40_000 { cache.insert(CountedKey(number, counter), number) }
        #expect(cache.count == 4096)
        counter.count.store(0, ordering: .relaxed)
        for number in 100_000..<101_000 { #expect(cache[CountedKey(number, counter)] == nil) }
        let perMiss = Double(counter.count.load(ordering: .relaxed)) / 1000
        #expect(perMiss < 8, "\(perMiss) comparisons per miss")
        #expect(cache[CountedKey(39_999, counter)] == 39_999 && cache[CountedKey(30_000, counter)] == nil)
    }
}

final class Comparisons: Sendable {
    let count = Atomic<Int>(0)
}

/// An integer key that counts its comparisons.
struct CountedKey: Hashable, Sendable {
    let value: Int
    let counter: Comparisons

    init(_ value: Int, _ counter: Comparisons) {
        self.value = value
        self.counter = counter
    }

    static func == (lhs: CountedKey, rhs: CountedKey) -> Bool {
        lhs.counter.count.add(1, ordering: .relaxed)
        return lhs.value == rhs.value
    }

    func hash(into hasher: inout Hasher) { hasher.combine(value) }
}
