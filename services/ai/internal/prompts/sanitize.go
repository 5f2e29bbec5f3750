package prompts

// Caps on untrusted items, in bytes of sanitised text. They keep one huge file, log or
// memory from crowding out the rest of the context (and the bill), while leaving room for
// every real source file.
const (
	maxFileBytes   = 200 << 10
	maxOutputBytes = 50 << 10
	maxMemoryBytes = 20 << 10
	// maxTextBytes caps prose: task descriptions, feedback, project requests, summaries.
	maxTextBytes = 50 << 10
	// maxShortBytes caps one-line items: titles, labels, a diagnostic's message.
	maxShortBytes = 2 << 10
	maxTreePaths  = 1000
)
