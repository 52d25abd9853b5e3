/// Chains the approval page names by genesis hash, with their token for amounts and the signed
/// extension lists their runtimes use (in order): a transaction for a known chain must carry one
/// of them even when the dapp gave no metadata, so no dapp can shift bytes between the call and
/// the extensions. Others are shown by hash, and only with metadata that lists their extensions.
enum KnownChains {
    struct Chain: Sendable {
        let name: String
        let token: String
        let decimals: Int
        let extensionLists: [[String]]
    }

    /// The relay chains' lists since `CheckMetadataHash` (2024), and the Cumulus chains' (whose
    /// newer runtimes add `StorageWeightReclaim`).
    static let relay = [
        "CheckNonZeroSender", "CheckSpecVersion", "CheckTxVersion", "CheckGenesis", "CheckMortality", "CheckNonce", "CheckWeight",
        "ChargeTransactionPayment", "CheckMetadataHash",
    ]
    static let polkadotRelay = Array(relay.dropLast()) + ["PrevalidateAttests", "CheckMetadataHash"]
    static let assetHub = [
        "CheckNonZeroSender", "CheckSpecVersion", "CheckTxVersion", "CheckGenesis", "CheckMortality", "CheckNonce", "CheckWeight",
        "ChargeAssetTxPayment", "CheckMetadataHash",
    ]
    static let assetHubs = [assetHub, assetHub + ["StorageWeightReclaim"]]

    static let byGenesis: [String: Chain] = [
        "0x91b171bb158e2d3848fa23a9f1c25182fb8e20313b2c1eb49219da7a70ce90c3": Chain(
            name: "Polkadot", token: "DOT", decimals: 10, extensionLists: [polkadotRelay, relay]),
        "0xb0a8d493285c2df73290dfb7e61f870f17b41801197a149ca93654499ea3dafe": Chain(
            name: "Kusama", token: "KSM", decimals: 12, extensionLists: [relay]),
        "0xe143f23803ac50e8f6f8e62695d1ce9e4e1d68aa36c1cd2cfd15340213f3423e": Chain(
            name: "Westend", token: "WND", decimals: 12, extensionLists: [relay]),
        "0x77afd6190f1554ad45fd0d31aee62aacc33c6db0ea801129acb813f913e0764f": Chain(
            name: "Paseo", token: "PAS", decimals: 10, extensionLists: [relay]),
        "0x68d56f15f85d3136970ec16946040bc1752654e906147f7e43e9d539d7c3de2f": Chain(
            name: "Polkadot Asset Hub", token: "DOT", decimals: 10, extensionLists: assetHubs),
        "0x48239ef607d7928874027a43a67689209727dfb3d3dc5e5b03a39bdc2eda771a": Chain(
            name: "Kusama Asset Hub", token: "KSM", decimals: 12, extensionLists: assetHubs),
        "0x67f9723393ef76214df0118c34bbbd3dbebc8ed46a10973a8c969d48fe7598c9": Chain(
            name: "Westend Asset Hub", token: "WND", decimals: 12, extensionLists: assetHubs),
        "0xd6eec26135305a8ad257a20d003357284c8aa03d0bdb2b357ab0a22371e11ef2": Chain(
            name: "Paseo Asset Hub", token: "PAS", decimals: 10, extensionLists: assetHubs),
    ]
}
