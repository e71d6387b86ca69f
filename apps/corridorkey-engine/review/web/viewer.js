// The frame on a canvas: zoom to fit, 1:1 and the mouse wheel, pan by dragging, a wipe
// between two images (A left of the line, B right of it), and image coordinates under the
// cursor for the probe. At 1:1 the image is drawn at whole-pixel offsets without smoothing,
// so the canvas holds the preview's pixels unchanged.

export class Viewer {
  constructor(canvas, { onProbe, onChange } = {}) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d', { alpha: false, willReadFrequently: true });
    this.img = null;
    this.imgB = null;
    this.wipe = null;  // null: no wipe; else the line's position, 0..1 of the image width
    this.scale = 1;
    this.ox = 0;
    this.oy = 0;
    this.mode = 'fit';  // fit | one | free
    this.onProbe = onProbe || (() => {});
    this.onChange = onChange || (() => {});
    this.drag = null;
    new ResizeObserver(() => this.resize()).observe(canvas);
    canvas.addEventListener('wheel', (e) => {
      e.preventDefault();
      const r = canvas.getBoundingClientRect(), dpr = window.devicePixelRatio || 1;
      this.zoomAt(e.deltaY < 0 ? 1.25 : 0.8, (e.clientX - r.left) * dpr, (e.clientY - r.top) * dpr);
    }, { passive: false });
    canvas.addEventListener('mousedown', (e) => {
      if (e.button !== 0) return;
      this.drag = { x: e.clientX, y: e.clientY, ox: this.ox, oy: this.oy, moved: false };
    });
    window.addEventListener('mouseup', () => { this.drag = null; });
    canvas.addEventListener('mousemove', (e) => {
      const dpr = window.devicePixelRatio || 1;
      if (this.drag) {
        const dx = (e.clientX - this.drag.x) * dpr, dy = (e.clientY - this.drag.y) * dpr;
        if (Math.abs(dx) + Math.abs(dy) > 2) this.drag.moved = true;
        if (this.drag.moved) {
          this.mode = 'free';
          this.ox = Math.round(this.drag.ox + dx);
          this.oy = Math.round(this.drag.oy + dy);
          this.render();
          return;
        }
      }
      const p = this.imagePoint(e.clientX, e.clientY);
      if (p) this.onProbe(p);
    });
    canvas.addEventListener('dblclick', () => this.fit());
  }

  size() {
    return this.img ? { w: this.img.width, h: this.img.height } : null;
  }

  /// Shows `img` (and `imgB` for the wipe); the view is kept when the size is unchanged.
  show(img, imgB = null) {
    const old = this.size();
    this.img = img;
    this.imgB = imgB;
    if (!old || old.w !== img.width || old.h !== img.height) this.place();
    this.render();
  }

  clear() {
    this.img = this.imgB = null;
    this.render();
  }

  setWipe(v) {
    this.wipe = v;
    this.render();
  }

  resize() {
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(1, Math.round(this.canvas.clientWidth * dpr));
    const h = Math.max(1, Math.round(this.canvas.clientHeight * dpr));
    if (w === this.canvas.width && h === this.canvas.height) return;
    this.canvas.width = w;
    this.canvas.height = h;
    this.place();
    this.render();
  }

  place() {
    if (this.mode === 'fit') this.fit(false);
    else if (this.mode === 'one') this.one(false);
  }

  fit(draw = true) {
    this.mode = 'fit';
    const s = this.size();
    if (s) {
      this.scale = Math.min(this.canvas.width / s.w, this.canvas.height / s.h);
      this.center(s);
    }
    if (draw) this.render();
  }

  one(draw = true) {
    this.mode = 'one';
    this.scale = 1;
    const s = this.size();
    if (s) this.center(s);
    if (draw) this.render();
  }

  center(s) {
    this.ox = Math.round((this.canvas.width - s.w * this.scale) / 2);
    this.oy = Math.round((this.canvas.height - s.h * this.scale) / 2);
  }

  zoomAt(factor, cx, cy) {
    const s = Math.min(64, Math.max(1 / 64, this.scale * factor));
    this.ox = Math.round(cx - (cx - this.ox) * (s / this.scale));
    this.oy = Math.round(cy - (cy - this.oy) * (s / this.scale));
    this.scale = s;
    this.mode = Math.abs(s - 1) < 1e-9 ? 'one' : 'free';
    this.render();
  }

  /// The image pixel under a client (CSS) position, or null outside the image.
  imagePoint(clientX, clientY) {
    const s = this.size();
    if (!s) return null;
    const r = this.canvas.getBoundingClientRect(), dpr = window.devicePixelRatio || 1;
    const x = Math.floor(((clientX - r.left) * dpr - this.ox) / this.scale);
    const y = Math.floor(((clientY - r.top) * dpr - this.oy) / this.scale);
    return x >= 0 && y >= 0 && x < s.w && y < s.h ? { x, y } : null;
  }

  render() {
    const c = this.ctx;
    c.setTransform(1, 0, 0, 1, 0, 0);
    c.fillStyle = '#111214';
    c.fillRect(0, 0, this.canvas.width, this.canvas.height);
    if (this.img) {
      c.imageSmoothingEnabled = this.scale < 1;
      c.setTransform(this.scale, 0, 0, this.scale, this.ox, this.oy);
      c.drawImage(this.img, 0, 0);
      if (this.imgB && this.wipe !== null) {
        const x = Math.round(this.img.width * this.wipe);
        c.drawImage(this.imgB, x, 0, this.imgB.width - x, this.imgB.height, x, 0, this.imgB.width - x, this.imgB.height);
        c.setTransform(1, 0, 0, 1, 0, 0);
        const lx = Math.round(this.ox + x * this.scale);
        c.fillStyle = '#ffd24a';
        c.fillRect(lx - 1, Math.max(0, this.oy - 8), 1, 6);  // a tick above the image, not over it
      }
    }
    this.onChange(this);
  }
}
