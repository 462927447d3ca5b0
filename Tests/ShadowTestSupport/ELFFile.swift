import Foundation

/// The parts of an ELF64 little-endian file that say what it links: the shared libraries its
/// dynamic section needs (`DT_NEEDED`) and the names in its symbol tables. Enough to check
/// what a binary was built from (System V ABI, "Object Files"), not a general ELF reader.
public struct ELFFile: Sendable {
    /// The `DT_NEEDED` entries: the shared libraries the loader maps, as named there.
    public let neededLibraries: [String]
    /// Every name in `.symtab` and `.dynsym`.
    public let symbols: [String]

    public struct FormatError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Reads the file at `path`.
    public init(path: String) throws {
        try self.init(bytes: [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
    }

    /// Reads an ELF image from memory; throws for anything but a 64-bit little-endian ELF file.
    public init(bytes: [UInt8]) throws {
        func fail(_ why: String) -> FormatError { FormatError(description: "not a readable ELF64 file: \(why)") }
        func integer(_ offset: Int, _ width: Int) throws -> Int {
            guard offset >= 0, width <= 8, offset <= bytes.count - width else {
                throw fail("a field at \(offset) runs past the end")
            }
            var value: UInt64 = 0
            for index in (0..<width).reversed() { value = value << 8 | UInt64(bytes[offset + index]) }
            guard value <= UInt64(Int.max) else { throw fail("a field at \(offset) is out of range") }
            return Int(value)
        }
        func string(_ table: (offset: Int, size: Int), _ index: Int) throws -> String {
            guard index >= 0, index < table.size else { throw fail("a name lies outside its string table") }
            let start = table.offset + index
            guard let end = bytes[start..<(table.offset + table.size)].firstIndex(of: 0) else {
                throw fail("an unterminated name")
            }
            return String(decoding: bytes[start..<end], as: UTF8.self)
        }
        guard bytes.count >= 64, bytes[0..<4].elementsEqual([0x7F, 0x45, 0x4C, 0x46]) else {
            throw fail("no ELF magic")
        }
        guard bytes[4] == 2, bytes[5] == 1 else { throw fail("only 64-bit little-endian files are read") }
        let sectionsAt = try integer(0x28, 8)
        let entrySize = try integer(0x3A, 2)
        let count = try integer(0x3C, 2)
        guard entrySize >= 64 else { throw fail("section header entries of \(entrySize) bytes") }
        struct Section { let type: Int, offset: Int, size: Int, link: Int, entrySize: Int }
        var sections: [Section] = []
        for index in 0..<count {
            let base = sectionsAt + index * entrySize
            sections.append(
                Section(
                    type: try integer(base + 4, 4), offset: try integer(base + 0x18, 8),
                    size: try integer(base + 0x20, 8),
                    link: try integer(base + 0x28, 4), entrySize: try integer(base + 0x38, 8)))
        }
        func table(_ index: Int) throws -> (offset: Int, size: Int) {
            guard sections.indices.contains(index) else {
                throw fail("a section links to section \(index), which does not exist")
            }
            let section = sections[index]
            guard section.offset <= bytes.count, section.size <= bytes.count - section.offset else {
                throw fail("a string table runs past the end")
            }
            return (section.offset, section.size)
        }
        var needed: [String] = []
        var symbols: [String] = []
        for section in sections {
            switch section.type {
            case 6:  // SHT_DYNAMIC: (tag, value) pairs of 8 bytes each; DT_NEEDED is tag 1.
                let names = try table(section.link)
                for entry in stride(from: section.offset, to: section.offset + section.size, by: 16) {
                    let tag = try integer(entry, 8)
                    if tag == 0 { break }
                    if tag == 1 { needed.append(try string(names, try integer(entry + 8, 8))) }
                }
            case 2, 11:  // SHT_SYMTAB, SHT_DYNSYM: 24-byte entries, the name's offset first.
                let names = try table(section.link)
                guard section.entrySize == 24 else { throw fail("symbol entries of \(section.entrySize) bytes") }
                for entry in stride(from: section.offset, to: section.offset + section.size, by: 24) {
                    let name = try integer(entry, 4)
                    if name != 0 { symbols.append(try string(names, name)) }
                }
            default: continue
            }
        }
        self.neededLibraries = needed
        self.symbols = symbols
    }
}
