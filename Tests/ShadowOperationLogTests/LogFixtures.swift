import Foundation
import ShadowCore
import ShadowOperationLog
import ShadowVault

/// Entries and keys the log tests share.
enum LogFixtures {
    static let key = SecretBytes((0..<32).map { UInt8($0) })
    static let unlock = VaultUnlock.key(key)
    static let origin = "example.com/sync-log"

    static func entry(_ number: Int, success: Bool = true) -> OperationEntry {
        OperationEntry(
            operation: ["upload", "download", "delete"][number % 3],
            provider: number % 2 == 0 ? "icloud" : "google-drive",
            entityType: "file", entityID: "Documents/report-\(number).pdf", time: 1_750_000_000_000 + Int64(number),
            success: success, error: success ? nil : "HTTP 503 from the provider",
            details: number % 5 == 0 ? ["bytes": .int(number * 1000)] : nil)
    }
}
