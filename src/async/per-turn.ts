/**
 * Gathers what is asked during one turn of the event loop and hands it to `flush` together. The
 * commits of one group-commit flush resolve in the same turn, so what each of them then asks of
 * the database goes out as one statement instead of one each (bench/ingest).
 */
export function perTurn<T>(flush: (items: T[]) => void): (item: T) => void {
  let items: T[] = []
  return (item) => {
    if (items.length === 0) {
      setImmediate(() => {
        const taken = items
        items = []
        flush(taken)
      })
    }
    items.push(item)
  }
}
