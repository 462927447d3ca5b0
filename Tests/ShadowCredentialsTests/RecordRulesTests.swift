@testable import ShadowCredentials
import Testing

/// Rules of the sealed record that Docs/credential-state.md states and the reader enforces.
@Suite struct RecordRulesTests {
    typealias Table = StateMachineTests

    /// The fold never keeps an authorization at or before the revocation, so no writer stores
    /// one; a reader refuses such a record rather than reading it either way.
    @Test(arguments: [0, -1])
    func anAuthorizationAtOrBeforeTheRevocationIsRefused(offset: Int64) throws {
        var record = CredentialRecord()
        record.revocation = CredentialRecord.Mark(
            timeMilliseconds: Table.t, id: "r", kind: .consentRevoked, linkedSubject: nil)
        record.authorization = CredentialRecord.Mark(
            timeMilliseconds: Table.t + offset, id: "a", kind: .signIn, linkedSubject: nil)
        let bytes = SealedRows.encode(clientID: Table.client, subject: "u", record: record)
        #expect(throws: CredentialError.self) { _ = try SealedRows.decode(bytes) }
        record.authorization = CredentialRecord.Mark(
            timeMilliseconds: Table.t + 1, id: "a", kind: .signIn, linkedSubject: nil)
        let later = SealedRows.encode(clientID: Table.client, subject: "u", record: record)
        #expect(try SealedRows.decode(later).record == record)
    }
}
