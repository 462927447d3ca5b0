import FoundationEssentials

// Touches FoundationEssentials so that it is linked and loaded, as it is in shadow-keys.
print("hello \(Date.now.timeIntervalSince1970 > 0)")
