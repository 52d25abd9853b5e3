import Foundation
import Testing
import WebAuthn
import WebAuthnTestSupport

/// 64 concurrent sign-ins from one process: all succeed, no "database is locked",
/// every counter exact.
@Suite struct ConcurrencyTests {
    @Test func sixtyFourConcurrentSignIns() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var authenticators: [SoftwareAuthenticator] = []
            for i in 0..<64 {
                var a = SoftwareAuthenticator()
                let reply = try await client.signUp(&a, username: "user\(i)")
                #expect(reply.status == .ok, "\(reply.json)")
                authenticators.append(a)
            }
            let results = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
                for (index, authenticator) in authenticators.enumerated() {
                    group.addTask {
                        var a = authenticator
                        var ok = 0
                        for _ in 0..<3 where try await client.signIn(&a).status == .ok { ok += 1 }
                        return (index, ok)
                    }
                }
                return try await group.reduce(into: [Int: Int]()) { $0[$1.0] = $1.1 }
            }
            #expect(results.count == 64 && results.values.allSatisfy { $0 == 3 })
            for a in authenticators {
                #expect(try await harness.store.credential(id: a.credentialID)?.signCount == 3)
            }
        }
    }
}
