/// One sentence for the calls people sign most, shown above the decoded call on the approval page:
/// "Send 1 DOT to 15oF4…, keeping your account open". Built only from the decoded arguments, so it
/// cannot say more than the call does; nil for every other call (the decoded call then stands alone).
extension DecodedCall {
    public var summary: String? {
        func value(_ name: String) -> String? { arguments.first { $0.name == name }?.value }
        func count(_ name: String) -> Int? { arguments.first { $0.name == name }?.count }
        func account(_ name: String) -> String? { value(name).map(Self.plainAccount) }
        switch (pallet, call) {
        case ("Balances", "transfer_keep_alive"), ("Balances", "transfer_allow_death"), ("Balances", "transfer"):
            guard let to = account("dest"), let amount = value("value") else { return nil }
            return "Send \(amount) to \(to)" + (call == "transfer_keep_alive" ? ", keeping your account open" : "")
        case ("Balances", "transfer_all"):
            guard let to = account("dest") else { return nil }
            return value("keep_alive") == "true"
                ? "Send all you can to \(to), keeping your account open" : "Send your whole transferable balance to \(to)"
        case ("System", "remark"), ("System", "remark_with_event"):
            guard let remark = value("remark") else { return nil }
            return "Write a remark on chain: " + (Self.printable(remark).map { VisibleText.quoted($0) } ?? remark)
        case ("Utility", "batch"), ("Utility", "batch_all"), ("Utility", "force_batch"):
            guard let calls = count("calls") else { return nil }
            let each =
                call == "batch_all" ? "all of them or none" : call == "force_batch" ? "each even if others fail" : "stopping at the first that fails"
            return "Make \(calls) call\(calls == 1 ? "" : "s") in one transaction, \(each)"
        case ("Staking", "bond"):
            return value("value").map { "Lock \($0) for staking" }
        case ("Staking", "bond_extra"):
            return value("max_additional").map { "Add up to \($0) to your stake" }
        case ("Staking", "unbond"):
            return value("value").map { "Start unbonding \($0) of your stake" }
        case ("Staking", "withdraw_unbonded"):
            return "Withdraw the stake that has finished unbonding"
        case ("Staking", "nominate"):
            return count("targets").map { "Nominate \($0) validator\($0 == 1 ? "" : "s")" }
        case ("Staking", "chill"):
            return "Stop nominating or validating"
        case ("NominationPools", "join"):
            guard let amount = value("amount"), let pool = value("pool_id") else { return nil }
            return "Join nomination pool \(pool) with \(amount)"
        case ("NominationPools", "claim_payout"):
            return "Claim your nomination pool rewards"
        case ("Proxy", "add_proxy"):
            guard let delegate = account("delegate"), let kind = value("proxy_type") else { return nil }
            return "Let \(delegate) act for this account (\(kind) proxy)"
        case ("Proxy", "remove_proxies"):
            return "Remove every proxy of this account"
        case ("ConvictionVoting", "vote"):
            return value("poll_index").map { "Vote on referendum \($0)" }
        default:
            return nil
        }
    }

    /// The account a transfer goes to, whole: the page shows it start…end with the rest one tap away.
    public var recipient: String? {
        switch (pallet, call) {
        case ("Balances", _): arguments.first { $0.name == "dest" }.map { Self.plainAccount($0.value) }
        default: nil
        }
    }

    /// `Id(15oF4…)`, the usual MultiAddress, as the bare address; other forms unchanged.
    static func plainAccount(_ shown: String) -> String {
        shown.hasPrefix("Id(") && shown.hasSuffix(")") ? String(shown.dropFirst(3).dropLast()) : shown
    }

    /// A remark's bytes as text, when they are short UTF-8 on one line; the summary quotes it with
    /// `VisibleText.quoted` (hidden characters, quotes and backslashes escaped), so neither a bidi
    /// override nor a quote mark inside can make the sentence read otherwise.
    static func printable(_ hex: String) -> String? {
        guard let bytes = PolkadotHex.decode(hex), bytes.count <= 256, let text = String(validating: bytes, as: UTF8.self), !text.contains("\n")
        else { return nil }
        return text
    }
}
