package qemu

// SetForkHook sets the hook a fork calls at its stages, for tests.
func SetForkHook(f func(stage string, copy *Machine)) { forkHook = f }
