package import ShadowCore

/// The outcome of one vector.
package struct VectorCase: Sendable {
    /// The vector's id within its suite (a Wycheproof `tcId`, a COUNT, or a name).
    package let id: String
    /// Whether ShadowKeys did what the vector expects.
    package let passed: Bool
    /// What was expected and what happened, for failure reports.
    package let detail: String

    package init(id: String, passed: Bool, detail: String) {
        (self.id, self.passed, self.detail) = (id, passed, detail)
    }

    /// The cases of a ShadowKeys vector file: `{"positive": [...], "negative": [...]}`, each
    /// object run through its checker.
    package static func positivesAndNegatives(
        _ bytes: [UInt8], positive: (JSONObject) -> VectorCase, negative: (JSONObject) -> VectorCase
    ) -> [VectorCase] {
        guard let root = try? StrictJSON.parse(bytes).objectValue else {
            return [VectorCase(id: "file", passed: false, detail: "not JSON")]
        }
        let positives = root["positive"]?.arrayValue?.compactMap(\.objectValue) ?? []
        let negatives = root["negative"]?.arrayValue?.compactMap(\.objectValue) ?? []
        return positives.map(positive) + negatives.map(negative)
    }
}

/// The outcome of one suite of vectors.
package struct SuiteResult: Sendable {
    /// The module whose code the suite exercises.
    package let module: String
    /// The suite's name, usually its source file.
    package let name: String
    /// Each vector's outcome.
    package let cases: [VectorCase]
    /// Set when the suite could not run at all (file missing or unreadable).
    package let error: String?
    /// Set when the suite was not run because it needs vector files and no folder was found.
    package let skipped: String?

    package init(module: String, name: String, cases: [VectorCase], error: String? = nil, skipped: String? = nil) {
        self.module = module
        self.name = name
        self.cases = cases
        self.error = error
        self.skipped = skipped
    }

    /// Vectors run.
    package var run: Int { cases.count }
    /// Vectors that passed.
    package var passed: Int { cases.count { $0.passed } }
    /// True when the suite ran and every vector passed.
    package var succeeded: Bool { error == nil && skipped == nil && !cases.isEmpty && passed == run }
    /// True when the suite failed: it could not run, or a vector did not pass. A skipped suite has not failed.
    package var failed: Bool { skipped == nil && !succeeded }
}

/// A vector file that is not in the expected shape.
package struct VectorFormatError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
