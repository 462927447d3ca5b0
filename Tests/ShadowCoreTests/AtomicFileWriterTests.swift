import Foundation
import Testing

@testable import ShadowCore

/// Files written whole or not at all, and devices and pipes written to, never replaced.
@Suite struct AtomicFileWriterTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("atomic-\(UUID().uuidString)").path

    init() throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
    }

    func kind(_ path: String) -> mode_t {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode & S_IFMT : 0
    }

    @Test func aFileAppearsWholeWithItsMode() throws {
        let path = directory + "/out"
        try Data("old".utf8).write(to: URL(fileURLWithPath: path))
        try Files.writeAtomically(path, Array("new".utf8), mode: 0o600)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "new")
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["out"])
    }

    /// `-o` naming a named pipe (or `/dev/null`, `/dev/stdout`) writes into it: renaming a file
    /// over it would replace the pipe or the device itself.
    @Test func aNamedPipeIsWrittenToNotReplaced() throws {
        let path = directory + "/pipe"
        #expect(mkfifo(path, 0o600) == 0)
        let reader = open(path, O_RDONLY | O_NONBLOCK)
        try #require(reader >= 0)
        defer { close(reader) }
        let writer = try AtomicFileWriter(path: path)
        try writer.write(Array("through the pipe".utf8))
        try writer.commit()
        #expect(kind(path) == S_IFIFO)
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(reader, &buffer, buffer.count)
        #expect(String(decoding: buffer.prefix(max(0, count)), as: UTF8.self) == "through the pipe")
    }

    @Test func devNullStaysADevice() throws {
        try Files.writeAtomically("/dev/null", Array("discarded".utf8))
        #expect(kind("/dev/null") == S_IFCHR)
    }

    @Test func exclusiveRefusesAnyExistingPathBeforeWriting() throws {
        let path = directory + "/key"
        try Data("kept".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: FileError("create", path, errno: EEXIST)) { try AtomicFileWriter(path: path, exclusive: true) }
        #expect(throws: FileError("create", "/dev/null", errno: EEXIST)) {
            try AtomicFileWriter(path: "/dev/null", exclusive: true)
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "kept")
    }

    @Test func aFolderIsRefused() throws {
        #expect(throws: FileError("write", directory, errno: EISDIR)) { try AtomicFileWriter(path: directory) }
    }
}
