import Foundation
import NIOCore
import NIOPosix

/// The hot paths' writes — sign-ins and the signer's audit entries — committed in groups on a
/// thread of their own (issue #29).
///
/// Why: the store's writes ran on the caller's thread under the writer lock, and the callers are
/// NIO's event loops. Under load a loop waited on that lock (or on a commit) while the sockets it
/// serves waited on it: at 256 connections wrk's p99 was 1.5–1.8 s though no request spent more
/// than ~130 ms in Keyfob's code. Here a caller hands its write to this thread and its loop goes
/// on with other work; the thread commits every write that arrived during the previous commit in
/// one transaction (one WAL commit and one set of file locks for all of them).
///
/// Each write is a savepoint of that transaction: one that fails (a counter raced by another
/// sign-in) is rolled back alone, and its caller alone gets the error. **A caller is answered only
/// after the transaction that holds its write has committed**, so every acknowledged sign-in and
/// signature is in the WAL when the client hears of it (a kill -9 loses none: e2e
/// `test_no_acknowledged_sign_in_is_lost_when_the_server_is_killed`,
/// `test_no_acknowledged_signature_loses_its_audit_entry_when_the_server_is_killed`).
///
/// Callers are answered on the event loop they called from, all of a loop's callers in one task
/// on it: a continuation resumed from this thread would go to whichever loop NIO picks next (it
/// runs Swift's tasks), and the answer would then hop back to its connection's loop.
final class GroupCommit: @unchecked Sendable {
    typealias Write = (SQLiteConnection) throws -> Void
    private typealias Caller = (write: Write, continuation: CheckedContinuation<Void, any Error>, loop: (any EventLoop)?)

    /// Writes one transaction takes at most: a bound on how long the first of them waits.
    static let maxPerTransaction = 128

    private let condition = NSCondition()
    // Under `condition`:
    private var queue: [Caller] = []
    private var stopped = false

    /// `run` executes a group's writes with the writer connection, under the writer lock.
    init(run: @escaping @Sendable (_ body: (SQLiteConnection) throws -> Void) throws -> Void) {
        let thread = Thread { [self] in serve(run) }
        thread.name = "keyfob-sqlite-group-commit"
        thread.start()
    }

    /// Runs `write` in the next group; returns once that group has committed, or throws what
    /// `write` threw (or the commit's error).
    func perform(_ write: @escaping Write) async throws {
        let loop = MultiThreadedEventLoopGroup.currentEventLoop
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            condition.lock()
            if stopped {
                condition.unlock()
                continuation.resume(throwing: StoreError.database("the store is closed"))
                return
            }
            queue.append((write, continuation, loop))
            condition.signal()
            condition.unlock()
        }
    }

    /// Ends the thread once the writes already queued are committed.
    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    private func serve(_ run: (_ body: (SQLiteConnection) throws -> Void) throws -> Void) {
        var group: [Caller] = []
        var results: [Result<Void, any Error>] = []
        while true {
            condition.lock()
            while queue.isEmpty && !stopped { condition.wait() }
            if queue.isEmpty {  // stopped, nothing left
                condition.unlock()
                return
            }
            let count = min(queue.count, Self.maxPerTransaction)
            group.append(contentsOf: queue.prefix(count))
            queue.removeFirst(count)
            condition.unlock()
            do {
                try run { connection in
                    try connection.transaction {
                        for item in group {
                            try connection.query("SAVEPOINT one_write")
                            do {
                                try item.write(connection)
                                try connection.query("RELEASE one_write")
                                results.append(.success(()))
                            } catch {
                                try connection.query("ROLLBACK TO one_write")
                                try connection.query("RELEASE one_write")
                                results.append(.failure(error))
                            }
                        }
                    }
                }
            } catch {
                // The transaction did not commit: none of its writes happened.
                results = group.map { _ in .failure(error) }
            }
            answer(group, results)
            group.removeAll(keepingCapacity: true)
            results.removeAll(keepingCapacity: true)
        }
    }

    /// Resumes each caller with its result on its own event loop, one task per loop.
    private func answer(_ group: [Caller], _ results: [Result<Void, any Error>]) {
        var batches: [(loop: any EventLoop, callers: [(CheckedContinuation<Void, any Error>, Result<Void, any Error>)])] = []
        for (caller, result) in zip(group, results) {
            guard let loop = caller.loop else {
                caller.continuation.resume(with: result)
                continue
            }
            if let index = batches.firstIndex(where: { $0.loop === loop }) {
                batches[index].callers.append((caller.continuation, result))
            } else {
                batches.append((loop, [(caller.continuation, result)]))
            }
        }
        for (loop, callers) in batches {
            loop.execute { for (continuation, result) in callers { continuation.resume(with: result) } }
        }
    }
}
