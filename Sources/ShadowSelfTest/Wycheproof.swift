package import ShadowCore

/// A Wycheproof vector file (schema v1): test groups, each with shared fields and test cases.
package struct WycheproofFile: Sendable {
    /// One test group: its shared fields (`publicKey`, `keySize`, …) and its cases.
    package struct Group: Sendable {
        package let fields: JSONObject
        package let tests: [Test]
    }

    /// One test case.
    package struct Test: Sendable {
        /// Wycheproof's expected outcome.
        package enum Result: String, Sendable {
            case valid, invalid, acceptable
        }

        package let tcId: Int
        package let comment: String
        package let flags: [String]
        package let result: Result
        package let fields: JSONObject

        /// A hex field decoded to bytes.
        package func bytes(_ name: String) throws -> [UInt8] {
            guard let hex = fields[name]?.stringValue else {
                throw VectorFormatError("tcId \(tcId): no hex field \"\(name)\"")
            }
            return try Hex.decode(hex)
        }
    }

    package let algorithm: String
    package let groups: [Group]

    /// A file restricted to some groups.
    package init(algorithm: String, groups: [Group]) {
        self.algorithm = algorithm
        self.groups = groups
    }

    /// Reads a Wycheproof JSON file.
    package init(json bytes: [UInt8]) throws {
        guard let root = try StrictJSON.parse(bytes, limits: .init(maxBytes: 16 << 20, maxDepth: 16)).objectValue,
            let groups = root["testGroups"]?.arrayValue
        else { throw VectorFormatError("not a Wycheproof file: no testGroups") }
        algorithm = root["algorithm"]?.stringValue ?? "?"
        self.groups = try groups.map { group in
            guard let object = group.objectValue, let tests = object["tests"]?.arrayValue else {
                throw VectorFormatError("test group without tests")
            }
            return Group(fields: object, tests: try tests.map(Self.test))
        }
    }

    private static func test(_ value: JSONValue) throws -> Test {
        guard let object = value.objectValue, let id = object["tcId"]?.numberValue?.int64Value,
            let resultName = object["result"]?.stringValue, let result = Test.Result(rawValue: resultName)
        else { throw VectorFormatError("malformed test case") }
        return Test(
            tcId: Int(id), comment: object["comment"]?.stringValue ?? "",
            flags: object["flags"]?.arrayValue?.compactMap(\.stringValue) ?? [], result: result, fields: object)
    }

    /// Runs `accepts` on every case and grades it: "valid" must be accepted, "invalid" rejected,
    /// and "acceptable" must match the decision recorded for one of its flags.
    package func grade(
        acceptableDecisions: [String: Bool] = [:],
        _ accepts: (Group, Test) throws -> Bool
    ) -> [VectorCase] {
        groups.flatMap { group in
            group.tests.map { test in
                let accepted: Bool
                var note = ""
                do { accepted = try accepts(group, test) } catch {
                    accepted = false
                    note = " (\(error))"
                }
                let expected: Bool?
                switch test.result {
                case .valid: expected = true
                case .invalid: expected = false
                case .acceptable: expected = test.flags.lazy.compactMap { acceptableDecisions[$0] }.first
                }
                let passed = expected == accepted
                let want = expected.map { $0 ? "accept" : "reject" } ?? "an undocumented decision"
                return VectorCase(
                    id: "tcId \(test.tcId)", passed: passed,
                    detail:
                        """
                        tcId \(test.tcId) [\(test.result.rawValue); \(test.flags.joined(separator: ","))] \
                        \(test.comment): expected \(want), got \(accepted ? "accept" : "reject")\(note)
                        """
                )
            }
        }
    }
}
