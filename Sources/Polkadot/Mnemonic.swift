import KeyfobCrypto

/// BIP-39 phrases (English) and Substrate's seed from them (paritytech/substrate-bip39): unlike
/// BIP-32 wallets, Substrate stretches the phrase's *entropy*, not the phrase, with
/// PBKDF2-HMAC-SHA512(entropy, "mnemonic" ‖ password, 2048) and keeps the first 32 bytes.
public enum Mnemonic {
    private static let wordIndex: [Substring: Int] = Dictionary(
        uniqueKeysWithValues: englishWords.enumerated().map { ($1, $0) })

    /// The entropy a phrase encodes; refuses unknown words (naming the first), a word count other
    /// than 12, 15, 18, 21 or 24, and a failed checksum.
    public static func entropy(of phrase: String) throws(PolkadotError) -> [UInt8] {
        let words = phrase.lowercased().split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" })
        guard [12, 15, 18, 21, 24].contains(words.count) else {
            throw PolkadotError(.invalidMnemonic, "a recovery phrase has 12, 15, 18, 21 or 24 words; this one has \(words.count)")
        }
        // The phrase's bits, one a byte: as secret as the entropy, and wiped like it.
        var bits: [UInt8] = []
        bits.reserveCapacity(words.count * 11)
        defer { wipe(&bits) }
        for (position, word) in words.enumerated() {
            guard let index = wordIndex[word] else {
                throw PolkadotError(.invalidMnemonic, "word \(position + 1) is not in the BIP-39 English list")
            }
            for shift in stride(from: 10, through: 0, by: -1) { bits.append(UInt8(index >> shift & 1)) }
        }
        let checksumBits = bits.count / 33
        let entropyBits = bits.count - checksumBits
        var entropy = [UInt8](repeating: 0, count: entropyBits / 8)
        for i in 0..<entropyBits { entropy[i / 8] |= bits[i] << UInt8(7 - i % 8) }
        var hash = sha256(entropy)
        defer { wipe(&hash) }
        for i in 0..<checksumBits where bits[entropyBits + i] != (hash[i / 8] >> UInt8(7 - i % 8)) & 1 {
            wipe(&entropy)
            throw PolkadotError(.invalidMnemonic, "the phrase's checksum does not match: a word is wrong or out of order")
        }
        return entropy
    }

    /// The phrase for 16–32 bytes of entropy (a multiple of 4).
    public static func phrase(entropy: [UInt8]) -> String {
        precondition((16...32).contains(entropy.count) && entropy.count % 4 == 0)
        var hash = sha256(entropy)
        var bits: [UInt8] = []
        bits.reserveCapacity(entropy.count * 8 + entropy.count / 4)
        defer {
            wipe(&hash)
            wipe(&bits)
        }
        for byte in entropy { for shift in stride(from: 7, through: 0, by: -1) { bits.append(byte >> UInt8(shift) & 1) } }
        for i in 0..<(entropy.count * 8 / 32) { bits.append((hash[i / 8] >> UInt8(7 - i % 8)) & 1) }
        return stride(from: 0, to: bits.count, by: 11).map { start in
            var index = 0
            for bit in bits[start..<(start + 11)] { index = index << 1 | Int(bit) }
            return String(englishWords[index])
        }.joined(separator: " ")
    }

    /// substrate-bip39's `mini_secret_from_entropy`: the 32-byte seed of every Substrate key type.
    public static func miniSecret(entropy: [UInt8], password: String = "") -> [UInt8] {
        var stretched = seed(entropy: entropy, password: password)
        defer { wipe(&stretched) }
        return Array(stretched[0..<32])
    }

    /// substrate-bip39's whole 64-byte `seed_from_entropy` (for its published vectors).
    static func seed(entropy: [UInt8], password: String) -> [UInt8] {
        pbkdf2SHA512(password: entropy, salt: Array("mnemonic\(password)".utf8), iterations: 2048, length: 64)
    }
}
