// module Nostr
