import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

@testable import KeyfobServer

/// What the load harness (scripts/load/run.py, BENCHMARKS.md) relies on in the server.
@Suite struct LoadHarnessTests {
    /// The ceiling routes exist only with `--bench-echo`, and do nothing but answer.
    @Test func benchEchoRoutesAreThereOnlyWhenAskedFor() async throws {
        try await Harness().run { client async throws in
            #expect(try await client.call(.post, "/bench/echo", json: ["a": 1]).status == .notFound)
            #expect(try await client.call(.get, "/bench/echo").status == .notFound)
        }
        try await Harness { $0.benchEcho = true }.run { client async throws in
            let post = try await client.call(.post, "/bench/echo", body: Array(repeating: UInt8(ascii: "x"), count: 900))
            #expect(post.status == .ok)
            #expect(post.json["bytes"] as? Int == 900)
            #expect(try await client.call(.get, "/bench/echo").status == .ok)
        }
    }

    /// The operator's recent activity is a ring: the newest `capacity` entries, newest first,
    /// however many were published.
    @Test func theActivityFeedKeepsTheNewestEntriesInOrder() {
        let feed = ActivityFeed(capacity: 3)
        func activity(_ n: Int) -> Activity {
            Activity(
                time: Date(timeIntervalSince1970: Double(n)), category: "ceremony", event: "e\(n)", user: nil, client: nil,
                method: nil, kind: nil, outcome: "ok", code: nil, ip: nil)
        }
        for n in 1...2 { feed.publish(activity(n)) }
        #expect(feed.recent().map(\.event) == ["e2", "e1"])
        for n in 3...7 { feed.publish(activity(n)) }
        #expect(feed.recent().map(\.event) == ["e7", "e6", "e5"])
        #expect(feed.since(Date(timeIntervalSince1970: 6)).map(\.event) == ["e6", "e7"])
        #expect(feed.recent(limit: 2).map(\.event) == ["e7", "e6"])
    }
}
