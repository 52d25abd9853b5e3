import NIOConcurrencyHelpers

/// Frames waiting to be written to one relay connection, bounded in bytes: per connection, and
/// together with every other connection's queue through a shared `OutboundBudget`. A reader that
/// stops reading while events keep arriving fills its queue; the next frame past a bound ends the
/// connection (`overflowed`) instead of holding more memory — a NIP-46 client that cannot keep up
/// reconnects and subscribes again, which is what the NIP expects of it anyway.
final class OutboundQueue: Sendable {
    private struct State {
        var frames: [String] = []
        var head = 0
        var bytes = 0
        var finished = false
        var overflowed = false
        var waiter: CheckedContinuation<String?, Never>?
    }

    private let state = NIOLockedValueBox(State())
    let maxBytes: Int
    let budget: OutboundBudget

    init(maxBytes: Int, budget: OutboundBudget) {
        self.maxBytes = maxBytes
        self.budget = budget
    }

    /// Queues `frame`; false (and the queue ends, `overflowed`) when a bound would be passed.
    @discardableResult
    func push(_ frame: String) -> Bool {
        let size = frame.utf8.count
        let waiter: CheckedContinuation<String?, Never>? = state.withLockedValue { state in
            guard !state.finished else { return nil }
            if let waiter = state.waiter {
                // A reader is waiting: the frame goes straight to it, nothing is held.
                state.waiter = nil
                return waiter
            }
            guard state.bytes + size <= maxBytes, budget.reserve(size) else {
                state.overflowed = true
                state.finished = true
                return nil
            }
            state.frames.append(frame)
            state.bytes += size
            return nil
        }
        if let waiter {
            waiter.resume(returning: frame)
            return true
        }
        return !isOverflowed
    }

    var isOverflowed: Bool { state.withLockedValue { $0.overflowed } }

    /// Ends the queue: `next()` returns what is queued, then nil.
    func finish() {
        let waiter: CheckedContinuation<String?, Never>? = state.withLockedValue { state in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// The next frame, waiting for one; nil once the queue is finished and empty (or overflowed:
    /// then whatever was still queued is dropped, since the connection is being closed).
    func next() async -> String? {
        // Cancelled (the connection is being torn down): the queue ends, and so does the wait.
        await withTaskCancellationHandler {
            await take()
        } onCancel: {
            finish()
        }
    }

    private func take() async -> String? {
        await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            let ready: String?? = state.withLockedValue { state in
                if state.overflowed {
                    dropAll(&state)
                    return .some(nil)
                }
                if state.head < state.frames.count {
                    let frame = state.frames[state.head]
                    state.head += 1
                    let size = frame.utf8.count
                    state.bytes -= size
                    budget.release(size)
                    if state.head == state.frames.count {
                        state.frames.removeAll(keepingCapacity: state.frames.capacity <= 64)
                        state.head = 0
                    }
                    return .some(frame)
                }
                if state.finished || Task.isCancelled { return .some(nil) }
                state.waiter = continuation
                return .none
            }
            if case .some(let frame) = ready { continuation.resume(returning: frame) }
        }
    }

    /// Gives every queued byte back (the connection is gone).
    func drain() {
        state.withLockedValue { state in
            dropAll(&state)
            state.finished = true
        }
    }

    private func dropAll(_ state: inout State) {
        budget.release(state.bytes)
        state.bytes = 0
        state.frames = []
        state.head = 0
    }
}

/// Bytes queued for slow readers across all relay connections, with a ceiling.
final class OutboundBudget: Sendable {
    let maxBytes: Int
    private let used = NIOLockedValueBox(0)

    init(maxBytes: Int) { self.maxBytes = maxBytes }

    func reserve(_ bytes: Int) -> Bool {
        used.withLockedValue { used in
            guard used + bytes <= maxBytes else { return false }
            used += bytes
            return true
        }
    }

    func release(_ bytes: Int) { used.withLockedValue { $0 -= bytes } }

    var bytesInUse: Int { used.withLockedValue { $0 } }
}
