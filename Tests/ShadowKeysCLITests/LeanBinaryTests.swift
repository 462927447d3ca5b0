import Foundation
import ShadowTestSupport
import Testing

/// What each executable links, read from its ELF file: `shadow-keys` starts like a C tool only
/// while it maps no full Foundation, no networking Foundation, no curl, no HTTP server and no
/// PostgreSQL client (Docs/cli.md, "Two executables").
@Suite(.ownThreads) struct LeanBinaryTests {
    /// Libraries the lean binary must not need: full Foundation (FoundationEssentials is what it
    /// uses), FoundationNetworking and libcurl behind it.
    static let forbiddenLibraries = [
        "libFoundation.so", "libFoundationNetworking.so", "libFoundationInternationalization.so", "libcurl",
    ]

    /// Modules that belong to `shadow-keys-server` alone.
    static let serverModules = [
        "Hummingbird", "PostgresNIO", "Prometheus", "ServiceLifecycle", "ShadowPostgres", "ShadowHummingbird",
    ]

    /// A module's name as Swift mangles it into every symbol of the module (`$s11Hummingbird…`).
    static func mangled(_ module: String) -> String { "\(module.utf8.count)\(module)" }

    #if os(Linux)
    @Test func shadowKeysLinksNoFullFoundationNoServerAndNoPostgres() throws {
        let lean = try ELFFile(path: CLIRunner.executable.path)
        #expect(!lean.neededLibraries.isEmpty, "read no DT_NEEDED entry from \(CLIRunner.executable.path)")
        for library in lean.neededLibraries {
            #expect(!Self.forbiddenLibraries.contains { library.hasPrefix($0) }, "shadow-keys links \(library)")
        }
        try #require(!lean.symbols.isEmpty, "shadow-keys has no symbol table to check (stripped?)")
        for module in Self.serverModules {
            let found = lean.symbols.first { $0.contains(Self.mangled(module)) }
            #expect(found == nil, "shadow-keys holds \(module): \(found ?? "")")
        }
        // The check can fail: the same reading finds what the lean binary does hold.
        for module in ["ShadowJOSE", "SQLiteNIO"] {
            #expect(lean.symbols.contains { $0.contains(Self.mangled(module)) }, "the reading misses \(module)")
        }
    }

    /// The server binary holds the server's modules: the reading above is not blind to them.
    @Test func shadowKeysServerHoldsWhatTheLeanBinaryLeavesOut() throws {
        let server = try ELFFile(path: CLIRunner.serverExecutable.path)
        for module in Self.serverModules {
            #expect(server.symbols.contains { $0.contains(Self.mangled(module)) }, "shadow-keys-server lacks \(module)")
        }
    }
    #endif

    @Test func theReaderRefusesWhatIsNotELF() {
        #expect(throws: ELFFile.FormatError.self) { try ELFFile(bytes: Array("#!/bin/sh\necho hi\n".utf8)) }
        var truncated: [UInt8] = [0x7F, 0x45, 0x4C, 0x46, 2, 1] + [UInt8](repeating: 0, count: 58)
        truncated[0x28] = 0xFF  // section headers past the end
        truncated[0x3A] = 64
        truncated[0x3C] = 1
        #expect(throws: ELFFile.FormatError.self) { try ELFFile(bytes: truncated) }
    }
}
