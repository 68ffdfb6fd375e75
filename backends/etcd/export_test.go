package etcd

// BeatsSent returns how many beats this process's feeds sent.
func BeatsSent() int { return int(beatsSent.Load()) }
