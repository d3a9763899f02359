// Fifo: an array-backed queue with O(1) amortised push and shift (a head
// index; the array is compacted once the dead prefix is large). Used for the
// request FIFO and the publish-window waiters, which can hold thousands.

/** Fifo is a first-in first-out queue. */
export class Fifo<T> {
  #items: (T | undefined)[] = [];
  #head = 0;

  /** length is the number of queued items. */
  get length(): number {
    return this.#items.length - this.#head;
  }

  /** push appends an item. */
  push(x: T): void {
    this.#items.push(x);
  }

  /** peek returns the first item without removing it. */
  peek(): T | undefined {
    return this.#head < this.#items.length ? this.#items[this.#head] : undefined;
  }

  /** shift removes and returns the first item. */
  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const x = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    if (this.#head === this.#items.length) {
      this.#items = [];
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return x;
  }

  /** drain removes and returns every item, in order. */
  drain(): T[] {
    const out = this.#items.slice(this.#head) as T[];
    this.#items = [];
    this.#head = 0;
    return out;
  }
}
