// Locky's Swagger UI start-up: our own document, no petstore, no online validator.
window.onload = function () {
  window.ui = SwaggerUIBundle({
    url: "./doc.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
};
