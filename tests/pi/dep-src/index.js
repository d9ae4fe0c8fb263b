// A dependency only the offline npm cache the test builds can provide.
export const shout = (s) => s.toUpperCase();
