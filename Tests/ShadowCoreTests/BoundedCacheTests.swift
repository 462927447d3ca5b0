import ShadowCore
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
        #expect(kept.count == 3)
        cache.insert(kept[0], "again")
        #expect(cache.count == 3 && cache[kept[0]] == "again")
        #expect((0..<10).filter { cache[$0] != nil } == kept)
        cache.remove(kept[1])
        #expect(cache[kept[1]] == nil && cache.count == 2)
    }
}
