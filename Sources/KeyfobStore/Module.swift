// module KeyfobStore
