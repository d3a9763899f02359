package fibril

// RetainedBytes is how many bytes of its encoded command f still holds
// (for TestConfirmedPubFutureReleasesFrame).
func (f *PubFuture) RetainedBytes() int { return len(f.r.frame) }
