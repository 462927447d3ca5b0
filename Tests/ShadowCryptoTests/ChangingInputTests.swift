import Dispatch
import Foundation
import ShadowCore
import ShadowCrypto
import ShadowTestSupport
import Testing

/// Inputs that change size while they are read. Decryption used to map its input and die with
/// SIGBUS when the file shrank, leaving plaintext in a `.partial-*` file.
@Suite struct ChangingInputTests {
    let directory: TemporaryDirectory
    let kek: KeyEncryptionKey

    init() throws {
        directory = try TemporaryDirectory()
        kek = try .raw(SecretBytes(Array(repeating: 7, count: 32)))
    }

    /// Writes `megabytes` MiB of seeded random bytes and returns the path.
    private func plaintext(megabytes: Int) throws -> String {
        var generator = SeededGenerator(seed: 0xC4A9_6E)
        var bytes = [UInt8](repeating: 0, count: megabytes << 20)
        bytes.withUnsafeMutableBytes { raw in
            for offset in stride(from: 0, to: raw.count, by: 8) {
                raw.storeBytes(of: generator.next(), toByteOffset: offset, as: UInt64.self)
            }
        }
        return try directory.write("plain.bin", Data(bytes))
    }

    private func sealed(megabytes: Int) throws -> String {
        let plain = try plaintext(megabytes: megabytes)
        let path = directory.path + "/sealed.skev"
        let fd = open(plain, O_RDONLY)
        defer { close(fd) }
        try EnvelopeFiles.encrypt(input: fd, toFile: path, kek: kek)
        return path
    }

    /// What the directory holds besides the given files.
    private func leftovers(besides names: Set<String>) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { !names.contains($0) }
    }

    /// Runs `change` on another thread the first time progress is reported, and waits for it.
    private func onFirstProgress(_ change: @escaping @Sendable () -> Void) -> (Int) -> Void {
        var fired = false
        return { _ in
            guard !fired else { return }
            fired = true
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                change()
                done.signal()
            }
            done.wait()
        }
    }

    @Test func decryptingAFileTruncatedMidwayFailsAndLeavesNothing() throws {
        let input = try sealed(megabytes: 8)
        let fd = open(input, O_RDONLY)
        defer { close(fd) }
        let output = directory.path + "/out.bin"
        let error = #expect(throws: ShadowCryptoError.self) {
            try EnvelopeFiles.decrypt(
                input: fd, toFile: output, kek: kek, progress: onFirstProgress { _ = truncate(input, 3 << 20) })
        }
        #expect(error?.code == .inputChanged, "\(String(describing: error))")
        #expect(try leftovers(besides: ["plain.bin", "sealed.skev"]).isEmpty)
    }

    @Test func decryptingAFileThatGrowsMidwayFails() throws {
        let input = try sealed(megabytes: 4)
        let fd = open(input, O_RDONLY)
        defer { close(fd) }
        let output = directory.path + "/out.bin"
        let error = #expect(throws: ShadowCryptoError.self) {
            try EnvelopeFiles.decrypt(
                input: fd, toFile: output, kek: kek,
                progress: onFirstProgress {
                    let append = open(input, O_WRONLY | O_APPEND)
                    _ = write(append, [UInt8](repeating: 0, count: 4096), 4096)
                    close(append)
                })
        }
        #expect(error?.code == .inputChanged)
        #expect(try leftovers(besides: ["plain.bin", "sealed.skev"]).isEmpty)
    }

    @Test func encryptingAFileTruncatedMidwayFails() throws {
        let input = try plaintext(megabytes: 8)
        let fd = open(input, O_RDONLY)
        defer { close(fd) }
        let output = directory.path + "/sealed.skev"
        let error = #expect(throws: ShadowCryptoError.self) {
            try EnvelopeFiles.encrypt(
                input: fd, toFile: output, kek: kek, progress: onFirstProgress { _ = truncate(input, 1 << 20) })
        }
        #expect(error?.code == .inputChanged)
        #expect(try leftovers(besides: ["plain.bin"]).isEmpty)
    }

    /// An interrupted decryption never leaves a named partial file, whatever kills it: on Linux
    /// the staging file has no name until the stream has authenticated.
    @Test func stagingFilesHaveNoName() throws {
        let writer = try AtomicFileWriter(path: directory.path + "/target")
        try writer.write(Array("secret".utf8))
        #if os(Linux)
        #expect(try leftovers(besides: []).isEmpty)
        #endif
        try writer.commit()
        #expect(try leftovers(besides: []) == ["target"])
        #expect(try String(contentsOfFile: directory.path + "/target", encoding: .utf8) == "secret")
        #expect(try Files.ownerAndMode(directory.path + "/target")?.mode == 0o600)
    }
}
