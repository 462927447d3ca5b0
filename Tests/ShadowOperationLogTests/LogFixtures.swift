import Foundation
import ShadowCore
import ShadowOperationLog
import ShadowVault
import Testing

/// Entries and keys the log tests share.
enum LogFixtures {
    static let key = SecretBytes((0..<32).map { UInt8($0) })
    static let unlock = VaultUnlock.key(key)
    static let origin = "example.com/sync-log"

    /// Runs `body` on a log over `storage`, closing the storage afterwards, thrown or not.
    static func withLog<R>(_ storage: any LogStorage, _ body: (OperationLog) async throws -> R) async throws -> R {
        do {
            let result = try await body(try OperationLog(storage: storage))
            await storage.close()
            return result
        } catch {
            await storage.close()
            throw error
        }
    }

    /// Appends entries `start ..< start + count` (``entry(_:success:)``).
    static func fill(_ log: OperationLog, count: Int, from start: Int = 0) async throws {
        _ = try await log.append(contentsOf: (start..<(start + count)).map { entry($0) })
    }

    /// An entity with `count` entries, at every third index from 1 in a log of `3 × count`: read
    /// a page at a time, each page from after the last, every one is found once, in order.
    static func pagesThroughAnEntity(_ log: OperationLog, count: Int) async throws {
        _ = try await log.append(
            contentsOf: (0..<(3 * count)).map { number in
                var entry = entry(number)
                if number % 3 == 1 { entry.entityID = "Documents/often.pdf" }
                return entry
            })
        var found: [UInt64] = []
        var from: UInt64 = 0
        while true {
            let page = try await log.indices(ofEntity: "Documents/often.pdf", from: from, limit: 4)
            found += page
            guard let last = page.last, page.count == 4 else { break }
            from = last + 1
        }
        let expected: [UInt64] = (0..<count).map { UInt64(3 * $0 + 1) }
        #expect(found == expected)
        #expect(try await log.indices(ofEntity: "Documents/often.pdf", from: 8, limit: 2) == [10, 13])
        #expect(try await log.indices(ofEntity: "Documents/often.pdf", from: .max, limit: 2) == [])
        await #expect(throws: LogError(.invalidParameter, "")) {
            _ = try await log.indices(ofEntity: "Documents/often.pdf", limit: OperationLog.maxReadCount + 1)
        }
    }

    static func entry(_ number: Int, success: Bool = true) -> OperationEntry {
        OperationEntry(
            operation: ["upload", "download", "delete"][number % 3],
            provider: number % 2 == 0 ? "icloud" : "google-drive",
            entityType: "file", entityID: "Documents/report-\(number).pdf", time: 1_750_000_000_000 + Int64(number),
            success: success, error: success ? nil : "HTTP 503 from the provider",
            details: number % 5 == 0 ? ["bytes": .int(number * 1000)] : nil)
    }
}
