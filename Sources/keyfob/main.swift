import ArgumentParser
import KeyfobServer
print("keyfob")
