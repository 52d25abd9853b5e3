/// Chains the approval page names by genesis hash, with their token for amounts. Others are shown
/// by hash (and by the name the dapp's metadata gives, marked as the dapp's).
enum KnownChains {
    struct Chain: Sendable {
        let name: String
        let token: String
        let decimals: Int
    }

    static let byGenesis: [String: Chain] = [
        "0x91b171bb158e2d3848fa23a9f1c25182fb8e20313b2c1eb49219da7a70ce90c3": Chain(name: "Polkadot", token: "DOT", decimals: 10),
        "0xb0a8d493285c2df73290dfb7e61f870f17b41801197a149ca93654499ea3dafe": Chain(name: "Kusama", token: "KSM", decimals: 12),
        "0xe143f23803ac50e8f6f8e62695d1ce9e4e1d68aa36c1cd2cfd15340213f3423e": Chain(name: "Westend", token: "WND", decimals: 12),
        "0x77afd6190f1554ad45fd0d31aee62aacc33c6db0ea801129acb813f913e0764f": Chain(name: "Paseo", token: "PAS", decimals: 10),
        "0x68d56f15f85d3136970ec16946040bc1752654e906147f7e43e9d539d7c3de2f": Chain(
            name: "Polkadot Asset Hub", token: "DOT", decimals: 10),
        "0x48239ef607d7928874027a43a67689209727dfb3d3dc5e5b03a39bdc2eda771a": Chain(
            name: "Kusama Asset Hub", token: "KSM", decimals: 12),
        "0x67f9723393ef76214df0118c34bbbd3dbebc8ed46a10973a8c969d48fe7598c9": Chain(
            name: "Westend Asset Hub", token: "WND", decimals: 12),
        "0xd6eec26135305a8ad257a20d003357284c8aa03d0bdb2b357ab0a22371e11ef2": Chain(
            name: "Paseo Asset Hub", token: "PAS", decimals: 10),
    ]

    /// A little-endian integer in decimal, with `decimals` places and the token ("0.0125 DOT").
    static func amount(_ littleEndian: [UInt8], decimals: Int?, token: String?) -> String {
        var digits = decimalDigits(littleEndian)
        guard let decimals, decimals > 0, let token else { return digits }
        if digits.count <= decimals { digits = String(repeating: "0", count: decimals - digits.count + 1) + digits }
        var whole = String(digits.dropLast(decimals))
        var fraction = String(digits.suffix(decimals))
        while fraction.hasSuffix("0") { fraction.removeLast() }
        if whole.isEmpty { whole = "0" }
        return (fraction.isEmpty ? whole : "\(whole).\(fraction)") + " \(token)"
    }

    /// Base-10 digits of a little-endian magnitude (at most 16 bytes here: a u128 tip).
    static func decimalDigits(_ littleEndian: [UInt8]) -> String {
        var number = Array(littleEndian.reversed().drop { $0 == 0 })  // big-endian, no leading zeros
        guard !number.isEmpty else { return "0" }
        var out: [Character] = []
        while !number.isEmpty {
            var remainder = 0
            var next: [UInt8] = []
            for byte in number {
                let value = remainder * 256 + Int(byte)
                let quotient = value / 10
                remainder = value % 10
                if !next.isEmpty || quotient != 0 { next.append(UInt8(quotient)) }
            }
            out.append(Character(String(remainder)))
            number = next
        }
        return String(out.reversed())
    }
}
