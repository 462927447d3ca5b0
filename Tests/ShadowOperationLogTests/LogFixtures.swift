import Foundation
import ShadowCore
import ShadowOperationLog
import ShadowVault

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

    static func entry(_ number: Int, success: Bool = true) -> OperationEntry {
        OperationEntry(
            operation: ["upload", "download", "delete"][number % 3],
            provider: number % 2 == 0 ? "icloud" : "google-drive",
            entityType: "file", entityID: "Documents/report-\(number).pdf", time: 1_750_000_000_000 + Int64(number),
            success: success, error: success ? nil : "HTTP 503 from the provider",
            details: number % 5 == 0 ? ["bytes": .int(number * 1000)] : nil)
    }
}
